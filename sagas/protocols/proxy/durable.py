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
import logging
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import anyio
import mcp.types as types
from django.conf import settings

from governance.errors import ServiceError
from governance.identity.principal import Principal
from governance.identity.rbac import EXECUTE, can
from governance.policy.gates import GateDecision
from sagas.operations.arguments import storable_problem
from sagas.protocols.mcp.tasks.negotiation import requested
from sagas.protocols.mcp.tasks.service import TaskService
from sagas.protocols.proxy.behind import ReadLine, now
from sagas.protocols.proxy.calls import (
    ClientIdentity,
    ProxiedCall,
    ProxiedRead,
    ReadAnswer,
    refused_result,
    unjournalable_result,
)
from sagas.protocols.proxy.client_sessions import ClientSessions, Session
from sagas.protocols.proxy.downstream import (
    DownstreamManager,
)
from sagas.protocols.proxy.elicited import (
    answer_in,
    approval_form,
    default_approvers,
    held_call_of,
    input_required,
    verdict,
)
from sagas.protocols.proxy.forwarding import Forwarder, Recorder
from sagas.protocols.proxy.held_tasks import HELD_CALL, HeldCallTasks
from sagas.protocols.proxy.journaling import ProxyJournal
from sagas.protocols.proxy.raw_channel import text_of_json
from sagas.protocols.proxy.reads import journaled_read
from sagas.protocols.proxy.specs import ProxyConfig, ServerSpec
from sagas.protocols.proxy.trust import ToolTrust, listening, trust_modes
from sagas.protocols.proxy.unsent_answers import carried_out_elsewhere, dry_result, refusal
from sagas.proxied_facts import Approvers, CallFacts, HeldAs, SessionFacts

logger = logging.getLogger("sagas.protocols.proxy")
Sent = TypeVar("Sent")
# How a read is sent once checked: Forwarder.forward (the SDK path) or forward_plain (the fast path).
Forward = Callable[[ProxiedCall, dict[str, Any], Recorder], Awaitable[Sent]]

# How often a held call asks whether it was decided (one indexed read; an approval is carried out within it), and
# how often it tells the client it is still waiting (a progress notification, the first one at once).
HOLD_POLL_SECONDS = 0.2
HOLD_PROGRESS_SECONDS = 2.0


class DurableCallPath:
    def __init__(self, downstreams: DownstreamManager, config: ProxyConfig) -> None:
        self.downstreams = downstreams
        self.config = config
        self.packs = config.packs.in_force(capture_enabled=config.capture)
        self.client_sessions = ClientSessions(self._open_session, str(config.path))
        self.journaling = ProxyJournal(config.max_result_bytes)
        journaling = self.journaling
        self.journal, self.behind, self.finishes = journaling.journal, journaling.behind, journaling.finishes
        # What each tool's class and gate may be, given its pinned definition (sagas.protocols.proxy.trust).
        self.trust = ToolTrust(self.journal, config.rules, self.packs, config.gates, trust_modes(config))
        downstreams.subscribe(listening(self.trust, lambda: downstreams.catalog, downstreams.first_catalog))
        # A held call of a client that negotiated MCP tasks is answered with a task (sagas.protocols.proxy.held_tasks).
        self.held_tasks = HeldCallTasks(self, refusal)
        self.forwarder = Forwarder(downstreams, self.trust.pack_entry, config.max_result_bytes, self._op)
        self.tasks = TaskService({HELD_CALL: self.held_tasks})

    async def call(self, request: ProxiedCall) -> types.CallToolResult | types.InputRequiredResult:
        with self.behind.busy():  # reads' journal lines are written while no call is being answered
            return await self._call(request)

    async def _call(self, request: ProxiedCall) -> types.CallToolResult | types.InputRequiredResult:
        if not can(request.principal, EXECUTE):
            return refused_result(
                request,
                f"{request.principal.principal_id} may read but not act (calling a tool needs the agent, operator or "
                "admin role)",
            )
        if request.request_state is not None:  # 2026-07-28: back with the person's answer to a held call
            return await self._resumed(request)
        if problem := storable_problem(request.arguments, "arguments", bound_strings=False):
            return unjournalable_result(request, problem)  # nothing the journal can refuse reaches the database
        try:
            fresh = await self._fresh(request)
            if fresh is None:
                return refused_result(request, "its server no longer offers it (it was just listed again)")
            request = fresh
            await self.trust.recheck(request.server, request.definition)
            facts = self._facts(request)
            if self._behind(request, facts) and (answered := await self._read_behind(request, facts)) is not None:
                return answered
            begun = await self._begin(request, facts)
        except ServiceError as refused:
            return refused_result(request, refused.message.rstrip("."))
        if begun["outcome"] == "held" and (wanted := requested()) is not None:
            return await self.held_tasks.defer(self.tasks, request, facts, begun, wanted)
        if begun["outcome"] == "held" and facts.held_as == "elicited":
            return input_required(request, facts, begun)
        return await self._after_begin(request, facts, begun)

    async def _begin(self, request: ProxiedCall, facts: CallFacts) -> dict[str, Any]:
        """proxy_call_begin in the client's session. A stateless client's session that an operator ended (committed
        or rolled back) is not its session any more: the call opens a new one."""
        session = self.known_session(request.principal, request.client) or await self._session(
            request.principal, request.client
        )
        arguments = request.arguments
        try:
            return await self._op(
                "proxy_call_begin", request.principal, saga_id=session.saga_id, call=facts, arguments=arguments
            )
        except ServiceError as refused:
            if refused.code != "PROXY_SESSION_NOT_ACTIVE" or not request.client.stateless:
                raise
        self.client_sessions.forget(session)
        session = await self._session(request.principal, request.client)
        return await self._op(
            "proxy_call_begin", request.principal, saga_id=session.saga_id, call=facts, arguments=arguments
        )

    # --- reads journaled behind their answers (sagas.protocols.proxy.behind) ------------------------------------

    def _behind(self, request: ProxiedCall, facts: CallFacts) -> bool:
        """Whether the call may take the write-behind path: class read, gate allow, no capture read declared, and
        arguments the journal can store (no NaN or Infinity: such a read is journaled ahead, where the journal's
        refusal stops it before it is sent, rather than sent and then missing from the ledger)."""
        plain = facts.effect_class == "read" and facts.gate == "allow" and "capture" not in facts.inverse
        return plain and text_of_json(request.arguments) is not None

    async def _read_behind(self, request: ProxiedCall, facts: CallFacts) -> types.CallToolResult | None:
        """Check that the read would be forwarded now, forward it and have its step written behind the answer;
        None when the check does not clear it (the write-ahead path then decides and journals it)."""
        return await self.read_behind(request, facts, self.forwarder.forward)

    async def read_behind(self, request: ProxiedCall, facts: CallFacts, forward: Forward[Sent]) -> Sent | None:
        """_read_behind with the forward of the caller's choice (the fast path's relays the answer as it came)."""
        principal, client = request.principal, request.client
        session = self.known_session(principal, client) or await self._session(principal, client)
        if not await self.read_cleared(principal.tenant_id, session.saga_id):
            return None

        step_id = str(uuid.uuid4())  # its step's id, and so its idempotency key, before the read is sent

        async def record(started: float, outcome: dict[str, Any]) -> None:
            arguments = request.arguments
            line = ReadLine(principal, session.saga_id, step_id, facts, arguments, outcome, started, now())
            self.finishes.flush(principal, session.saga_id)  # the outcomes of the calls before it go first
            self.behind.submit(line)

        return await forward(request, {"step_id": step_id}, record)

    async def read_cleared(self, tenant_id: str, saga_id: str) -> bool:
        return await self.journaling.read_cleared(tenant_id, saga_id)

    async def _after_begin(self, request: ProxiedCall, facts: CallFacts, begun: dict[str, Any]) -> types.CallToolResult:
        if begun["outcome"] == "held":
            begun = await self._hold(request, facts, begun)
        if begun["outcome"] == "forward":
            return await self._forward(request, begun)
        if begun["outcome"] == "dry":
            return dry_result(request, facts, begun)
        if begun["outcome"] == "closed":
            return carried_out_elsewhere(request, begun)
        return refusal(request, begun)

    async def read(self, request: ProxiedRead[ReadAnswer]) -> ReadAnswer:
        """A resources/read or prompts/get: a step of class read in the session (sagas.protocols.proxy.reads)."""
        with self.behind.busy():
            return await journaled_read(self, request, self._spec(request.server).block())

    def hidden(self, principal: Principal, client: ClientIdentity, server: str, tool: types.Tool) -> bool:
        """A tool whose gate is `hide` for this tenant and client is left out of tools/list (and answered as an
        unknown tool if called)."""
        return self._gate(principal, client, server, tool).action == "hide"

    def holds(self, principal: Principal, client: ClientIdentity, server: str, tool: types.Tool) -> bool:
        """A tool whose gate is `confirm` for this caller: tools/list offers its calls as tasks (taskSupport)."""
        return self._gate(principal, client, server, tool).action == "confirm"

    def _gate(self, principal: Principal, client: ClientIdentity, server: str, tool: types.Tool) -> GateDecision:
        found = self.trust.classify(server, tool)
        return self.trust.gate(server, tool, found.effect_class, principal.tenant_id, client.client_name or "")

    async def _fresh(self, request: ProxiedCall) -> ProxiedCall | None:
        """The call as the server's current listing defines it: the tools are read again first when the server said
        they changed and they were not read since, or for a non-read call when the listing is older than
        SAGA_PROXY_RELIST_SECONDS (so a definition changed without list_changed is seen); None if the tool is gone.
        A read is delayed by a re-listing only after a list_changed."""
        read = self.trust.classify(request.server, request.definition).effect_class == "read"
        if read and not self.downstreams.tools_stale(request.server):
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

    def known_session(self, principal: Principal, client: ClientIdentity) -> Session | None:
        return self.client_sessions.known(principal, client)

    async def _session(self, principal: Principal, client: ClientIdentity) -> Session:
        return await self.client_sessions.get(principal, client)

    async def _open_session(self, principal: Principal, session: SessionFacts) -> str:
        opened = await self._op("proxy_session_open", principal, session=session, preview=self.config.preview)
        return str(opened["saga_id"])

    # --- facts ----------------------------------------------------------------------------------------------------

    def _facts(self, request: ProxiedCall) -> CallFacts:
        tool = request.definition
        entry = self.trust.pack_entry(request.server, request.tool)
        found = self.trust.classify(request.server, tool)
        client_name = request.client.client_name or ""
        tenant = request.principal.tenant_id
        gate = self.trust.gate(request.server, tool, found.effect_class, tenant, client_name)
        pin = self.trust.state(request.server, tool)
        approvers, held_as = self._waiting(request, gate)
        return CallFacts(
            server=request.server,
            tool=request.tool,
            exposed_name=request.exposed_name,
            server_block=self._spec(request.server).block(),
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
            inverse_gates=self.trust.inverse_gates(request.server, entry, tenant, client_name, self._listed(request)),
            confirm_timeout_seconds=self.config.gates.confirm_timeout_seconds,
            held_as=held_as,
            approvers=approvers,
        )

    def _listed(self, request: ProxiedCall) -> dict[str, types.Tool]:
        """The tools `request`'s server lists now, by their own names."""
        return {t.tool.name: t.tool for t in self.downstreams.catalog.tools.values() if t.server == request.server}

    def _waiting(self, request: ProxiedCall, gate: GateDecision) -> tuple[Approvers, HeldAs]:
        """Who decides the call if it is held, and how it waits (sagas.protocols.proxy.elicited)."""
        as_task = requested() is not None
        chosen = gate.approver or self.config.gates.approver or default_approvers(self.config.served_over)
        approvers: Approvers = "both" if chosen == "both" else "client" if chosen == "client" else "operators"
        if as_task or not request.client_elicits:
            approvers = "operators"  # a task has no open request to ask on; a client that cannot be asked is not
        if as_task:
            return approvers, "task"
        return approvers, "elicited" if request.client.stateless and approvers != "operators" else "request"

    def _spec(self, server: str) -> ServerSpec:
        return next(spec for spec in self.config.servers if spec.name == server)

    # --- held calls -----------------------------------------------------------------------------------------------

    async def _hold(self, request: ProxiedCall, facts: CallFacts, begun: dict[str, Any]) -> dict[str, Any]:
        """Keep the request open until the held call is decided (asking the person at the client meanwhile, when
        its gate says so); a client that goes away cancels it."""
        held = {"saga_id": begun["saga_id"], "node_id": begun["node_id"]}
        async with anyio.create_task_group() as group:
            if facts.approvers != "operators" and facts.held_as == "request":
                group.start_soon(self._ask_client, request, facts, held)
            decided = await self._decision(request, facts, held)
            group.cancel_scope.cancel()  # an operator decided first: the form is withdrawn
        return decided

    async def _ask_client(self, request: ProxiedCall, facts: CallFacts, held: dict[str, str]) -> None:
        """2025-11-25: the form on the held call's own stream; the person's answer is a decision like an operator's
        (the first one wins)."""
        answer = await request.relay.elicit(approval_form(request, facts))
        await self._client_decides(request, held, verdict(answer))

    async def _client_decides(self, request: ProxiedCall, held: dict[str, str], approved: bool | None) -> None:
        if approved is None:
            return  # dismissed or unanswerable: the operators still decide
        try:
            await self._op("proxy_call_client_decision", request.principal, **held, approved=approved)
        except ServiceError as late:  # decided already (the first decision wins), or expired: the poll tells
            logger.info("client decision not recorded for %s: %s", held["node_id"], late.message)

    async def _resumed(self, request: ProxiedCall) -> types.CallToolResult:
        """A 2026-07-28 retry of a held call answered input_required, carrying the person's answer: record it, then
        wait for the decision (an operator may have decided first) and carry it out."""
        max_age = int(self.config.gates.confirm_timeout_seconds) + 60
        held = held_call_of(request.request_state or "", request.principal, max_age)
        await self._client_decides(request, held, verdict(answer_in(request)))
        return await self._after_begin(request, self._facts(request), {**held, "outcome": "held"})

    async def _decision(self, request: ProxiedCall, facts: CallFacts, held: dict[str, str]) -> dict[str, Any]:
        timeout = facts.confirm_timeout_seconds
        started = time.monotonic()
        told = -HOLD_PROGRESS_SECONDS  # when the client was last told (waited seconds)
        try:
            while True:
                decision = await self._op("proxy_call_decision", request.principal, **held)
                if decision["decision"] == "closed":  # another request for the same held call carried it out
                    return {**decision, "outcome": "closed"}
                if decision["decision"] == "approved" and not await self.still_offered(request, facts):
                    return await self._withdraw(request, facts, held, "redefined")
                if decision["decision"] == "approved":
                    try:
                        return await self._op(
                            "proxy_call_release", request.principal, **held, call=facts, arguments=request.arguments
                        )
                    except ServiceError:  # released meanwhile by another request for it (a replayed retry)
                        await anyio.sleep(HOLD_POLL_SECONDS)
                        continue
                waited = time.monotonic() - started
                if decision["decision"] != "pending" or waited >= timeout:
                    why = "timeout" if decision["decision"] in ("pending", "expired") else "denied"
                    return await self._withdraw(request, facts, held, why)
                if waited - told >= HOLD_PROGRESS_SECONDS:
                    message = f"waiting for an operator to approve {request.exposed_name} (call {held['node_id']})"
                    await request.relay.progress(waited, timeout, message)
                    told = waited
                await anyio.sleep(HOLD_POLL_SECONDS)
        except anyio.get_cancelled_exc_class():
            with anyio.CancelScope(shield=True):
                await self._withdraw(request, facts, held, "disconnected")
            raise

    async def _withdraw(self, request: ProxiedCall, facts: CallFacts, held: dict[str, str], why: str) -> dict[str, Any]:
        return await self._op(
            "proxy_call_withdraw", request.principal, **held, why=why, call=facts, arguments=request.arguments
        )

    # --- forwarding (sagas.protocols.proxy.forwarding) ---------------------------------------------------------

    async def _forward(self, request: ProxiedCall, begun: dict[str, Any]) -> types.CallToolResult:
        return await self.forwarder.forward(request, begun)

    async def _finish(
        self, request: ProxiedCall, begun: dict[str, Any], started: float, outcome: dict[str, Any]
    ) -> None:
        await self.forwarder.record(request.principal, begun, started, outcome)

    async def record_outcome(
        self, principal: Principal, begun: dict[str, Any], started: float, outcome: dict[str, Any]
    ) -> None:
        await self.forwarder.record(principal, begun, started, outcome)

    async def _op(self, name: str, principal: Principal, **arguments: Any) -> dict[str, Any]:
        return await self.journaling.op(name, principal, **arguments)

    async def aclose(self) -> None:
        await self.journaling.aclose()


def durable(downstreams: DownstreamManager, config: ProxyConfig) -> DurableCallPath:
    """The call path factory for build_proxy."""
    return DurableCallPath(downstreams, config)
