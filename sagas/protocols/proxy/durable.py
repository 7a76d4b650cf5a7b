"""The durable call path: every tools/call journaled as a step of its session's saga before it is forwarded.

For each call the proxy classifies the tool (registry.tool_classes), finds its gate (governance.policy.gates) and
any declared inverse (the compensation packs), then asks the coordinator, through the operation table
(sagas.operations.proxied), what happens: refused, dry (preview), held for an operator, or forwarded. A forwarded
call carries the step id as its idempotency key and its outcome is recorded; a held call keeps the request open
with progress notifications until an operator decides or the confirm timeout passes. docs/proxy.md, "How a call is
journaled".
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import time
from dataclasses import dataclass, field
from typing import Any

import anyio
import mcp.types as types
from django.conf import settings
from mcp.shared.exceptions import MCPError

from governance.errors import ServiceError
from governance.identity.principal import Principal
from governance.identity.rbac import EXECUTE, can
from governance.policy.gates import GateDecision
from registry.errors import ActionFailure
from registry.packs import tool_result_payload
from sagas.operations.invoke import invoke
from sagas.operations.table import OPERATIONS
from sagas.protocols.mcp_tasks.negotiation import requested
from sagas.protocols.mcp_tasks.service import TaskService
from sagas.protocols.proxy.calls import (
    PROXY_META_KEY,
    ClientIdentity,
    ProxiedCall,
    ProxiedRead,
    ReadAnswer,
    not_sent_result,
    refused_result,
    too_large_result,
    uncertain_result,
)
from sagas.protocols.proxy.downstream import (
    DownstreamLost,
    DownstreamManager,
    DownstreamUnavailable,
    ResultTooLarge,
)
from sagas.protocols.proxy.held_tasks import HELD_CALL, HeldCallTasks
from sagas.protocols.proxy.journal import Journal
from sagas.protocols.proxy.reads import journaled_read
from sagas.protocols.proxy.specs import ProxyConfig, ServerSpec
from sagas.protocols.proxy.trust import ToolTrust, listening
from sagas.proxied_facts import CallFacts, CallOutcome, ClientInfo, SessionFacts

logger = logging.getLogger("sagas.protocols.proxy")

IDEMPOTENCY_META_KEY = "io.semantic-saga/idempotency_key"
# Client sessions one proxy process keeps in memory: far more than its live connections; a forgotten one's next
# call opens a new session saga.
SESSIONS_REMEMBERED = 10_000
# How often a held call asks whether it was decided, and sends the client a progress notification.
HOLD_POLL_SECONDS = 0.5
GONE_BEFORE_SENT = "the client went away before the call was sent"
GONE_WHILE_OUT = "the client went away while the call was out, so its answer was not read: whether it acted is unknown"


@dataclass
class Session:
    saga_id: str
    last_used: float = field(default_factory=time.monotonic)


class DurableCallPath:
    def __init__(self, downstreams: DownstreamManager, config: ProxyConfig) -> None:
        self.downstreams = downstreams
        self.config = config
        self.packs = config.packs.in_force(capture_enabled=config.capture)
        self.sessions: dict[str, Session] = {}
        self.journal = Journal()
        # What each tool's class and gate may be, given its pinned definition (sagas.protocols.proxy.trust).
        self.trust = ToolTrust(self.journal, config.rules, self.packs, config.gates)
        downstreams.subscribe(listening(self.trust, lambda: downstreams.catalog))
        self._opening = anyio.Lock()
        # A held call of a client that negotiated MCP tasks is answered with a task (sagas.protocols.proxy.held_tasks).
        self.held_tasks = HeldCallTasks(self, _refusal)
        self.tasks = TaskService({HELD_CALL: self.held_tasks})

    async def call(self, request: ProxiedCall) -> types.CallToolResult:
        if not can(request.principal, EXECUTE):
            return refused_result(
                request,
                f"{request.principal.principal_id} may read but not act (calling a tool needs the operator role)",
            )
        try:
            fresh = await self._fresh(request)
            if fresh is None:
                return refused_result(request, "its server no longer offers it (it was just listed again)")
            request = fresh
            await self.trust.recheck(request.server, request.definition)
            session = await self._session(request.principal, request.client)
            facts = self._facts(request)
            begun = await self._op(
                "proxy_call_begin", request.principal, saga_id=session.saga_id, call=facts, arguments=request.arguments
            )
        except ServiceError as refused:
            return refused_result(request, refused.message.rstrip("."))
        if begun["outcome"] == "held" and (wanted := requested()) is not None:
            return await self.held_tasks.defer(self.tasks, request, facts, begun, wanted)
        if begun["outcome"] == "held":
            begun = await self._hold(request, facts, begun)
        if begun["outcome"] == "forward":
            return await self._forward(request, begun)
        if begun["outcome"] == "dry":
            return _dry_result(request, facts, begun)
        return _refusal(request, begun)

    async def read(self, request: ProxiedRead[ReadAnswer]) -> ReadAnswer:
        """A resources/read or prompts/get: a step of class read in the session (sagas.protocols.proxy.reads)."""
        return await journaled_read(self, request, _server_block(self._spec(request.server)))

    def hidden(self, principal: Principal, client: ClientIdentity, server: str, tool: types.Tool) -> bool:
        """A tool whose gate is `hide` for this tenant and client is left out of tools/list (and answered as an
        unknown tool if called)."""
        return self._gate(principal, client, server, tool).action == "hide"

    def holds(self, principal: Principal, client: ClientIdentity, server: str, tool: types.Tool) -> bool:
        """A tool whose gate is `confirm` for this caller: tools/list offers its calls as tasks (taskSupport)."""
        return self._gate(principal, client, server, tool).action == "confirm"

    def _gate(self, principal: Principal, client: ClientIdentity, server: str, tool: types.Tool) -> GateDecision:
        found = self.trust.classify(server, tool)
        return self.trust.gate(server, tool.name, found.effect_class, principal.tenant_id, client.client_name or "")

    async def _fresh(self, request: ProxiedCall) -> ProxiedCall | None:
        """The call as the server's current listing defines it: a non-read call whose tool listing is older than
        SAGA_PROXY_RELIST_SECONDS has it read again first (so a definition changed without list_changed is seen);
        None if the tool is gone. A read is never delayed by a re-listing."""
        if self.trust.classify(request.server, request.definition).effect_class == "read":
            return request
        await self.downstreams.relist_tools(request.server, older_than=float(settings.SAGA_PROXY_RELIST_SECONDS))
        current = self.downstreams.catalog.tools.get(request.exposed_name)
        if current is None or current.server != request.server:
            return None
        if current.definition_hash == request.definition_hash:
            return request
        return dataclasses.replace(request, definition=current.tool, definition_hash=current.definition_hash)

    async def still_offered(self, request: ProxiedCall, facts: CallFacts) -> bool:
        """Whether the server still lists the definition a held call was approved under (read again now)."""
        await self.downstreams.relist_tools(request.server)
        current = self.downstreams.catalog.tools.get(request.exposed_name)
        return current is not None and current.definition_hash == facts.definition_hash

    async def client_initialized(self, principal: Principal, client: ClientIdentity) -> None:
        """A 2025-11-25 session's saga is opened at the handshake, so operators see it before its first call."""
        if not can(principal, EXECUTE):
            return  # a viewer's session journals nothing: each of its calls is refused
        try:
            await self._session(principal, client)
        except ServiceError as refused:  # e.g. a kill switch engaged: its first call will say why
            logger.warning("proxy session not opened client=%s: %s", client.client_name, refused.message)

    # --- sessions -------------------------------------------------------------------------------------------------

    async def _session(self, principal: Principal, client: ClientIdentity) -> Session:
        # Keyed by tenant and principal too: a session is never found for anyone but who opened it (stateless
        # clients of two tenants with the same principal and client name included).
        owner = f"{principal.tenant_id}|{principal.principal_id}"
        key = f"{owner}|{client.client_name or ''}" if client.stateless else f"{owner}|{client.key}"
        async with self._opening:
            session = self.sessions.get(key)
            now = time.monotonic()
            idle = float(settings.SAGA_PROXY_SESSION_IDLE_SECONDS)
            if session is not None and not (client.stateless and now - session.last_used > idle):
                session.last_used = now
                return session
            metadata = SessionFacts(
                client=ClientInfo(name=client.client_name, version=client.client_version),
                protocol_version=client.protocol_version,
                era="2026-07-28" if client.stateless else "2025-11-25",
                connection=key,
                config=str(self.config.path),
            )
            opened = await self._op("proxy_session_open", principal, session=metadata, preview=self.config.preview)
            session = self.sessions[key] = Session(str(opened["saga_id"]))
            self._forget_oldest()
            return session

    def _forget_oldest(self) -> None:
        """Bound the sessions this process remembers (their sagas stay): the least recently used go first."""
        excess = len(self.sessions) - SESSIONS_REMEMBERED
        if excess > 0:
            for key in sorted(self.sessions, key=lambda k: self.sessions[k].last_used)[:excess]:
                del self.sessions[key]

    # --- facts ----------------------------------------------------------------------------------------------------

    def _facts(self, request: ProxiedCall) -> CallFacts:
        tool = request.definition
        entry = self.packs.inverse_for(request.server, request.tool)
        found = self.trust.classify(request.server, tool)
        client_name = request.client.client_name or ""
        tenant = request.principal.tenant_id
        gate = self.trust.gate(request.server, request.tool, found.effect_class, tenant, client_name)
        pin = self.trust.state(request.server, request.tool)
        return CallFacts(
            server=request.server,
            tool=request.tool,
            exposed_name=request.exposed_name,
            server_block=_server_block(self._spec(request.server)),
            definition=tool.model_dump(by_alias=True, exclude_none=True, mode="json"),
            definition_hash=request.definition_hash,
            pinned_definition_hash=pin.pinned_hash,
            definition_changed=not pin.trusted,
            definition_changes=pin.changes,
            effect_class=found.effect_class,
            class_source=found.source,
            class_reason=found.reason,
            gate=gate.action,
            gate_source=gate.source,
            gate_reason=gate.reason,
            inverse=entry.as_mcp_contract_parts() if entry else {},
            inverse_source=self.trust.inverse_source(request.server, request.tool),
            confirm_timeout_seconds=self.config.gates.confirm_timeout_seconds,
            held_as="task" if requested() is not None else "request",
        )

    def _spec(self, server: str) -> ServerSpec:
        return next(spec for spec in self.config.servers if spec.name == server)

    # --- held calls -----------------------------------------------------------------------------------------------

    async def _hold(self, request: ProxiedCall, facts: CallFacts, begun: dict[str, Any]) -> dict[str, Any]:
        """Keep the request open until the held call is decided; a client that goes away cancels it."""
        held = {"saga_id": begun["saga_id"], "node_id": begun["node_id"]}
        timeout = facts.confirm_timeout_seconds
        started = time.monotonic()
        try:
            while True:
                decision = await self._op("proxy_call_decision", request.principal, **held)
                if decision["decision"] == "approved" and not await self.still_offered(request, facts):
                    return await self._withdraw(request, facts, held, "redefined")
                if decision["decision"] == "approved":
                    return await self._op(
                        "proxy_call_release", request.principal, **held, call=facts, arguments=request.arguments
                    )
                waited = time.monotonic() - started
                if decision["decision"] != "pending" or waited >= timeout:
                    why = "timeout" if decision["decision"] in ("pending", "expired") else "denied"
                    return await self._withdraw(request, facts, held, why)
                message = f"waiting for an operator to approve {request.exposed_name} (call {held['node_id']})"
                await request.relay.progress(waited, timeout, message)
                await anyio.sleep(HOLD_POLL_SECONDS)
        except anyio.get_cancelled_exc_class():
            with anyio.CancelScope(shield=True):
                await self._withdraw(request, facts, held, "disconnected")
            raise

    async def _withdraw(self, request: ProxiedCall, facts: CallFacts, held: dict[str, str], why: str) -> dict[str, Any]:
        return await self._op(
            "proxy_call_withdraw", request.principal, **held, why=why, call=facts, arguments=request.arguments
        )

    # --- forwarding -----------------------------------------------------------------------------------------------

    async def _forward(self, request: ProxiedCall, begun: dict[str, Any]) -> types.CallToolResult:
        meta = {**request.meta, IDEMPOTENCY_META_KEY: begun["step_id"]}
        started = time.monotonic()
        outcome: dict[str, Any] = {"max_result_bytes": self.config.max_result_bytes}
        try:
            if (pre_state := await self._capture(request, begun)) is not None:
                outcome.update(captured=True, pre_state=pre_state)
        except CaptureFailed as failed:
            await self._finish(request, begun, started, {**outcome, "kind": "not_sent", "reason": str(failed)})
            return _not_sent(request, str(failed))
        except anyio.get_cancelled_exc_class():  # the client went away before the call was sent
            await self._finish(request, begun, started, {**outcome, "kind": "not_sent", "reason": GONE_BEFORE_SENT})
            raise
        try:
            result = await self.downstreams.call_tool(
                request.server, request.tool, request.arguments, relay=request.relay, meta=meta
            )
        except DownstreamUnavailable as down:
            await self._finish(request, begun, started, {**outcome, "kind": "not_sent", "reason": str(down)})
            return _not_sent(request, str(down))
        except DownstreamLost as lost:
            await self._finish(request, begun, started, {**outcome, "kind": "lost", "reason": str(lost)})
            return uncertain_result(request, str(lost))
        except ResultTooLarge as oversized:
            done = {"kind": "too_large", "reason": str(oversized), "size_bytes": oversized.size_bytes}
            await self._finish(request, begun, started, {**outcome, **done})
            return too_large_result(request, oversized)
        except anyio.get_cancelled_exc_class():
            # The client went away (or the proxy is stopping) while the call was out: nobody will read the answer
            # and whether the tool acted is unknown, so the step is recorded uncertain and its lease let go, not
            # left EXECUTING for as long as this process lives.
            await self._finish(request, begun, started, {**outcome, "kind": "lost", "reason": GONE_WHILE_OUT})
            raise
        except MCPError as error:
            reason = f"the server answered with a protocol error: {error}"
            await self._finish(
                request, begun, started, {**outcome, "kind": "answered", "is_error": True, "reason": reason}
            )
            raise
        answer = self.downstreams.scrub(
            request.server, result.model_dump(by_alias=True, exclude_none=True, mode="json")
        )
        await self._finish(
            request,
            begun,
            started,
            {**outcome, "kind": "answered", "result": answer, "is_error": bool(result.is_error)},
        )
        return result  # exactly what the downstream answered

    async def _capture(self, request: ProxiedCall, begun: dict[str, Any]) -> Any:
        """The pack's capture read, after the gate and before the call (its answer is the step's `pre_state`, which
        the inverse reads); None when the tool's pack entry has no capture. CaptureFailed: the call is not sent."""
        entry = self.packs.inverse_for(request.server, request.tool)
        if entry is None or entry.capture is None:
            return None
        meta = {IDEMPOTENCY_META_KEY: f"{begun['step_id']}:capture"}
        where = f"the capture read {entry.capture.tool} (declared by {entry.source})"
        try:
            arguments = entry.capture_arguments(request.arguments)
            read = await self.downstreams.call_tool(
                request.server, entry.capture.tool, arguments, relay=request.relay, meta=meta
            )
        except (ActionFailure, DownstreamUnavailable, DownstreamLost, ResultTooLarge, MCPError) as error:
            raise CaptureFailed(f"{where} failed ({error}), so the call was not sent") from None
        answer = self.downstreams.scrub(request.server, read.model_dump(by_alias=True, exclude_none=True, mode="json"))
        if read.is_error:
            raise CaptureFailed(f"{where} answered an error ({tool_result_payload(answer)}), so the call was not sent")
        return tool_result_payload(answer)

    async def _finish(
        self, request: ProxiedCall, begun: dict[str, Any], started: float, outcome: dict[str, Any]
    ) -> None:
        await self.record_outcome(request.principal, begun, started, outcome)

    async def record_outcome(
        self, principal: Principal, begun: dict[str, Any], started: float, outcome: dict[str, Any]
    ) -> None:
        """Record what a forwarded call or read did (proxy_call_finish), with its duration since `started`."""
        recorded = CallOutcome.model_validate({**outcome, "duration_ms": round((time.monotonic() - started) * 1000, 3)})
        with anyio.CancelScope(shield=True):  # a client gone mid-call must not leave the outcome unrecorded
            await self._op(
                "proxy_call_finish",
                principal,
                saga_id=begun["saga_id"],
                step_id=begun["step_id"],
                fence=int(begun["fence"]),
                outcome=recorded,
            )

    async def _op(self, name: str, principal: Principal, **arguments: Any) -> dict[str, Any]:
        return await self.journal.run(functools.partial(invoke, OPERATIONS[name], principal, arguments))

    async def aclose(self) -> None:
        await anyio.to_thread.run_sync(self.journal.close)


class CaptureFailed(Exception):
    """The state before a call could not be read, so the call was not sent (its inverse would have nothing)."""


def durable(downstreams: DownstreamManager, config: ProxyConfig) -> DurableCallPath:
    """The call path factory for build_proxy."""
    return DurableCallPath(downstreams, config)


def _server_block(spec: ServerSpec) -> dict[str, Any]:
    """The contract's `server` block: where a later undo reconnects (secret references stay references)."""
    if spec.transport == "stdio":
        block: dict[str, Any] = {"transport": "stdio", "command": spec.command, "args": list(spec.args)}
        if spec.env:
            block["env"] = dict(spec.env)
        if spec.cwd is not None:
            block["cwd"] = str(spec.cwd)
        return block
    block = {"transport": "streamable_http", "url": spec.url}
    if spec.headers:
        block["headers"] = dict(spec.headers)
    return block


def _meta(request: ProxiedCall, begun: dict[str, Any], outcome: str) -> dict[str, Any]:
    return {
        PROXY_META_KEY: {
            "outcome": outcome,
            **begun.get("facts", {}),
            "code": begun.get("code", ""),
            "step_id": begun.get("step_id", ""),
            "saga_id": begun.get("saga_id", ""),
        }
    }


def _refusal(request: ProxiedCall, begun: dict[str, Any]) -> types.CallToolResult:
    facts = begun.get("facts", {})
    why = str(begun.get("reason") or "it was refused").rstrip(".")
    klass = f" (class {facts['class']}, gate {facts.get('gate')})" if facts.get("class") else ""
    text = (
        f"{request.exposed_name} did NOT run and was not sent{klass}: {why}. Do not retry it and do not work around "
        "it with other tools or changed arguments; tell the user what you meant to do and why it was stopped, or "
        "carry on with what you may do."
    )
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=text)], is_error=True, _meta=_meta(request, begun, "refused")
    )


def _dry_result(request: ProxiedCall, facts: CallFacts, begun: dict[str, Any]) -> types.CallToolResult:
    text = (
        f"PREVIEW: {request.exposed_name} was recorded, NOT executed (this session is a dry run). Outside preview it "
        f"would have had class {facts.effect_class} and gate {facts.gate}: it {begun.get('reason', 'would run')}. "
        "Nothing reached the world; keep planning as if it had worked, and do not rely on its result."
    )
    # A client checks a non-error answer against the tool's outputSchema, which a note cannot satisfy.
    has_schema = request.definition.output_schema is not None
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=text)], is_error=has_schema, _meta=_meta(request, begun, "dry")
    )


def _not_sent(request: ProxiedCall, reason: str) -> types.CallToolResult:
    return not_sent_result(request, reason)
