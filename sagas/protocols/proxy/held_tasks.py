"""A held proxied call as an MCP task: the tools/call of a client that negotiated tasks is answered at once with a
task (durable before it is returned) that ends when an operator decides, instead of a request kept open.

The task row (sagas.models.McpTask, kind `proxy.held_call`) names the session saga and the held call's node and
keeps the call as it came (server, tool, definition, arguments, the facts the gate was decided on), so any proxy
process serving the same configuration can finish it after a restart. Decisions go through the operation table
exactly as on the blocking path (DurableCallPath._hold):

    approved        -> proxy_call_release, forwarded: the task is completed with exactly the downstream's result
                       (unless the server no longer offers the approved definition: withdrawn, nothing sent)
    denied, expired -> proxy_call_withdraw: completed with the isError refusal the blocking path gives
    confirm timeout -> proxy_call_withdraw(why="timeout"): the same (counted from the task's creation)
    tasks/cancel    -> proxy_call_withdraw(why="cancelled"): cancelled (tasks/result gives that refusal); a later
                       approve is refused. A call already forwarded is not interrupted: the cancel says so and the
                       task ends with the downstream's answer.

A forwarded task call has no open client request, so a downstream's own requests during it (elicitation,
sampling, roots) are answered with an error and its progress goes nowhere. docs/proxy.md, "Held calls as MCP tasks".
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Protocol

import anyio
import mcp.types as types
from mcp.shared.exceptions import MCPError

from governance.errors import ServiceError
from governance.identity.principal import Principal
from sagas.models import McpTask
from sagas.protocols.mcp.tasks.negotiation import TaskRequest, announce
from sagas.protocols.mcp.tasks.service import POLL_INTERVAL_MS, POLL_SECONDS, Finish, Note, TaskService, ttl_for
from sagas.protocols.mcp.tasks.store import NewTask
from sagas.protocols.proxy.calls import ClientIdentity, ProxiedCall, refused_result, uncertain_result
from sagas.protocols.proxy.relay import SamplingAnswer
from sagas.proxied_facts import CallFacts

HELD_CALL = "proxy.held_call"
# A held call's task is kept at least this long after its confirm timeout, so its answer can still be fetched.
RESULT_KEPT_MS = 3600 * 1000


Refusal = Callable[[ProxiedCall, dict[str, Any]], types.CallToolResult]


class HeldCallPath(Protocol):
    """What the kind uses of sagas.protocols.proxy.durable.DurableCallPath (the same steps as its blocking hold)."""

    async def _op(self, name: str, principal: Principal, **arguments: Any) -> dict[str, Any]: ...

    async def _withdraw(
        self, request: ProxiedCall, facts: CallFacts, held: dict[str, str], why: str
    ) -> dict[str, Any]: ...

    async def _forward(self, request: ProxiedCall, begun: dict[str, Any]) -> types.CallToolResult: ...

    async def still_offered(self, request: ProxiedCall, facts: CallFacts) -> bool: ...

    async def _finish(
        self, request: ProxiedCall, begun: dict[str, Any], started: float, outcome: dict[str, Any]
    ) -> None: ...


class HeldCallTasks:
    """The `proxy.held_call` task kind of one DurableCallPath; `refusal` writes the agent's isError answer."""

    def __init__(self, path: HeldCallPath, refusal: Refusal) -> None:
        self.path = path
        self.refusal = refusal

    async def defer(
        self,
        tasks: TaskService,
        request: ProxiedCall,
        facts: CallFacts,
        begun: dict[str, Any],
        wanted: TaskRequest,
    ) -> types.CallToolResult:
        """Answer a held call with a task (its handle replaces this answer on the wire)."""
        timeout_ms = int(facts.confirm_timeout_seconds * 1000)
        new = NewTask(
            kind=HELD_CALL,
            protocol_version=wanted.protocol_version,
            status="input_required",
            status_message=_waiting(request, begun),
            request=_kept(request, facts),
            ttl_ms=ttl_for(wanted.ttl_ms, at_least_ms=timeout_ms + RESULT_KEPT_MS),
            poll_interval_ms=POLL_INTERVAL_MS,
            saga_id=str(begun["saga_id"]),
            node_id=str(begun["node_id"]),
        )
        return announce(await tasks.create(request.principal, new))

    async def drive(self, task: McpTask, principal: Principal, note: Note) -> Finish:
        request, facts = _call_of(task, principal)
        try:
            return await self._decided(task, principal, note, request, facts)
        except ServiceError as refused:  # e.g. the session was rolled back meanwhile: the agent is told why
            return _answered(refused_result(request, refused.message.rstrip(".")))

    async def _decided(
        self, task: McpTask, principal: Principal, note: Note, request: ProxiedCall, facts: CallFacts
    ) -> Finish:
        """Wait for the operator's decision (or the confirm timeout) and carry it out."""
        held = {"saga_id": task.saga_id, "node_id": task.node_id}
        timeout = facts.confirm_timeout_seconds
        while True:
            decision = await self.path._op("proxy_call_decision", principal, **held)
            if decision["decision"] == "approved" and not await self.path.still_offered(request, facts):
                return _answered(self.refusal(request, await self.path._withdraw(request, facts, held, "redefined")))
            if decision["decision"] == "approved":
                await note("working", f"approved by {decision['decided_by'] or 'an operator'}: calling {request.tool}")
                begun = await self.path._op(
                    "proxy_call_release", principal, **held, call=facts, arguments=request.arguments
                )
                if begun["outcome"] != "forward":
                    return _answered(self.refusal(request, begun))
                return await self._forward(request, begun)
            if decision["decision"] == "pending":
                if time.time() - task.created_at.timestamp() < timeout:
                    await anyio.sleep(POLL_SECONDS)
                    continue
                begun = await self.path._withdraw(request, facts, held, "timeout")
            elif decision["decision"] in ("denied", "expired"):
                begun = await self.path._withdraw(request, facts, held, "denied")
            else:
                return self._closed(request, facts, decision)
            if not begun.get("reason"):  # journaled already (by a tasks/cancel, or a driver that stopped)
                return self._closed(request, facts, await self.path._op("proxy_call_decision", principal, **held))
            return _answered(self.refusal(request, begun))

    async def cancel(self, task: McpTask, principal: Principal) -> Finish | str:
        request, facts = _call_of(task, principal)
        held = {"saga_id": task.saga_id, "node_id": task.node_id}
        begun = await self.path._withdraw(request, facts, held, "cancelled")
        if begun.get("reason"):
            return Finish("cancelled", f"cancelled: {begun['reason']}", result=_dump(self.refusal(request, begun)))
        decision = await self.path._op("proxy_call_decision", principal, **held)
        if decision.get("step_status") == "REFUSED":
            return self._closed(request, facts, decision)
        return (
            f"Cannot cancel task {task.id}: its call of {request.tool} was already approved and sent to "
            f"{request.server}, and a call in flight is not interrupted. The task ends with the server's answer "
            "(tasks/result)."
        )

    async def _forward(self, request: ProxiedCall, begun: dict[str, Any]) -> Finish:
        started = time.monotonic()
        try:
            result = await self.path._forward(request, begun)
        except anyio.get_cancelled_exc_class():
            # The proxy stops with the call in flight: its step is journaled uncertain now (what the sweep would
            # conclude once the lease lapsed), and the next process finishes the task with that.
            with anyio.CancelScope(shield=True):
                reason = "the proxy stopped while the call was in flight, so its answer was not seen"
                await self.path._finish(request, begun, started, {"kind": "lost", "reason": reason})
            raise
        except MCPError as error:  # the downstream's own protocol error: the task failed with it
            return Finish(
                "failed", f"{request.server} answered with an error: {error.error.message}", error=_error(error)
            )
        return _answered(result)

    def _closed(self, request: ProxiedCall, facts: CallFacts, decision: dict[str, Any]) -> Finish:
        """The call was journaled before this driver got to it: refused (say why), or sent by a process that stopped
        before the task recorded the answer (its outcome is not known here)."""
        if decision.get("step_status") == "REFUSED":
            begun = {"code": decision["step_code"], "reason": decision["step_reason"], "facts": facts.gate_facts()}
            answer = self.refusal(request, begun)
            cancelled = decision["step_code"] == "CONFIRM_CANCELLED"
            return Finish("cancelled" if cancelled else "completed", decision["step_reason"], result=_dump(answer))
        reason = (
            "the proxy process that sent it stopped before this task recorded the answer (the session's ledger, "
            "`semantic-saga ledger`, shows the step)"
        )
        return _answered(uncertain_result(request, reason))


class DetachedRelay:
    """The relay of a call that runs as a task: no client request is open to carry anything back."""

    def __init__(self, client_key: str) -> None:
        self._client_key = client_key

    @property
    def client_key(self) -> str:
        return self._client_key

    async def progress(self, progress: float, total: float | None = None, message: str | None = None) -> None:
        return None

    async def log(self, params: types.LoggingMessageNotificationParams) -> None:
        return None

    async def elicit(self, params: types.ElicitRequestParams) -> types.ElicitResult | types.ErrorData:
        return _unreachable("elicitation")

    async def sample(self, params: types.CreateMessageRequestParams) -> SamplingAnswer:
        return _unreachable("sampling")

    async def list_roots(self) -> types.ListRootsResult | types.ErrorData:
        return _unreachable("roots")


def _unreachable(what: str) -> types.ErrorData:
    return types.ErrorData(
        code=-32600,
        message=f"This call runs as an MCP task, with no request of the agent open to carry a {what} request; the "
        "agent was not asked.",
    )


def _waiting(request: ProxiedCall, begun: dict[str, Any]) -> str:
    return (
        f"waiting for an operator to approve {request.exposed_name} on {request.server} (held call "
        f"{begun['node_id']}: semantic-saga approve/deny, or the console's approval queue)"
    )


def _kept(request: ProxiedCall, facts: CallFacts) -> dict[str, Any]:
    """What the row keeps to finish the call in any process."""
    client = request.client
    return {
        "exposed_name": request.exposed_name,
        "server": request.server,
        "tool": request.tool,
        "definition_hash": request.definition_hash,
        "arguments": request.arguments,
        "meta": request.meta,
        "facts": facts.model_dump(mode="json"),
        "client": {
            "key": client.key,
            "protocol_version": client.protocol_version,
            "stateless": client.stateless,
            "client_name": client.client_name,
            "client_version": client.client_version,
        },
    }


def _call_of(task: McpTask, principal: Principal) -> tuple[ProxiedCall, CallFacts]:
    kept = task.request
    facts = CallFacts.model_validate(kept["facts"])
    client = ClientIdentity(session_id=None, **kept["client"])
    request = ProxiedCall(
        principal=principal,
        client=client,
        exposed_name=kept["exposed_name"],
        server=kept["server"],
        tool=kept["tool"],
        definition_hash=kept["definition_hash"],
        definition=types.Tool.model_validate(facts.definition),
        arguments=kept["arguments"],
        meta=kept["meta"],
        relay=DetachedRelay(client.key),
    )
    return request, facts


def _answered(result: types.CallToolResult) -> Finish:
    return Finish("completed", "denied or refused" if result.is_error else "completed", result=_dump(result))


def _dump(result: types.CallToolResult) -> dict[str, Any]:
    return result.model_dump(by_alias=True, exclude_none=True, mode="json")


def _error(error: MCPError) -> dict[str, Any]:
    return error.error.model_dump(by_alias=True, exclude_none=True, mode="json")
