"""Journaled protocol reads: every resources/read and prompts/get through the durable path is a step of the
session's saga, class `read` by the protocol, through the same operations as a tools/call (`proxy_call_begin`,
`proxy_call_finish`; docs/proxy.md, "How a call is journaled").

A read is never held and never dry (a preview forwards reads: a blind agent cannot plan), but the kill switch and
tenant policy decide on it as on a call; one they refuse, or one policy would hold for an approval, is answered
with a JSON-RPC error written for an LLM, nothing sent. A forwarded read records the downstream's answer (secrets
scrubbed, truncated past ledger.maxResultBytes with its original size) and its duration, or its failure:
`READ_ERROR` for the downstream's own error, `DOWNSTREAM_UNAVAILABLE` when it could not be sent, `ANSWER_LOST`
when the answer never came (a read changes nothing, so that outcome is not uncertain).
"""

from __future__ import annotations

import time
from typing import Any, Protocol

from mcp.shared.exceptions import MCPError
from mcp_types.jsonrpc import INVALID_REQUEST

from audit.canonical import sha256_hex
from governance.errors import ServiceError
from governance.identity.principal import Principal
from sagas.protocols.proxy.calls import PROXY_META_KEY, ClientIdentity, ProxiedRead, ReadAnswer, refuse_viewer_read
from sagas.protocols.proxy.downstream import DownstreamLost, DownstreamManager, DownstreamUnavailable, ResultTooLarge
from sagas.protocols.proxy.specs import ProxyConfig
from sagas.proxied_facts import CallFacts

RESOURCES_READ = "resources/read"
PROMPTS_GET = "prompts/get"
# The step's input, as its contract's input_schema declares it (the step snapshot pins one per method).
_INPUT_SCHEMAS: dict[str, dict[str, Any]] = {
    RESOURCES_READ: {"type": "object", "properties": {"uri": {"type": "string"}}, "required": ["uri"]},
    PROMPTS_GET: {
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "arguments": {"type": ["object", "null"], "additionalProperties": {"type": "string"}},
        },
        "required": ["name"],
    },
}


class SessionSaga(Protocol):
    saga_id: str


class DurablePath(Protocol):
    """What a journaled read shares with the tools/call of sagas.protocols.proxy.durable.DurableCallPath (structural:
    this module is below durable.py): its downstreams and config, its client sessions and its journal."""

    downstreams: DownstreamManager
    config: ProxyConfig

    async def _session(self, principal: Principal, client: ClientIdentity) -> SessionSaga: ...

    async def _op(self, name: str, principal: Principal, **arguments: Any) -> dict[str, Any]: ...

    async def record_outcome(
        self, principal: Principal, begun: dict[str, Any], started: float, outcome: dict[str, Any]
    ) -> None: ...


async def journaled_read(
    path: DurablePath, request: ProxiedRead[ReadAnswer], server_block: dict[str, Any]
) -> ReadAnswer:
    """Journal the read as a step of its session (EXECUTING before it is sent), forward it, record the outcome."""
    refuse_viewer_read(request)
    try:
        session = await path._session(request.principal, request.client)
        begun = await path._op(
            "proxy_call_begin",
            request.principal,
            saga_id=session.saga_id,
            call=read_facts(request, server_block),
            arguments=request.arguments,
        )
    except ServiceError as refused:
        raise _refusal(request, refused.message, {"code": refused.code}) from None
    if begun["outcome"] != "forward":  # refused: the kill switch, tenant policy, or an approval it cannot wait for
        raise _refusal(request, str(begun.get("reason") or "it was refused"), begun)
    return await _forward(path, request, begun)


def read_facts(request: ProxiedRead[Any], server_block: dict[str, Any]) -> CallFacts:
    """The `call` facts proxy_call_begin pins for a read (sagas.coordinator.proxy.contract), as for a tool; its
    definition hash is the catalog's listing of what is read, and `method` marks a read by the protocol."""
    listed_hash = sha256_hex({"method": request.method, "listed": request.listed})
    return CallFacts(
        server=request.server,
        tool=request.method,
        method=request.method,
        exposed_name=f"{request.method} {request.target}",
        server_block=server_block,
        definition={
            "name": request.method,
            "description": f"{request.method} of {request.target} on {request.server}, through the proxy",
            "inputSchema": _INPUT_SCHEMAS[request.method],
        },
        definition_hash=listed_hash,
        pinned_definition_hash=listed_hash,
        effect_class="read",
        class_source="protocol",
        class_reason=f"{request.method} is a read by the protocol",
        gate="allow",
        gate_source="protocol",
        gate_reason="reads are never held or dry; the kill switch and tenant policy still decide",
    )


async def _forward(path: DurablePath, request: ProxiedRead[ReadAnswer], begun: dict[str, Any]) -> ReadAnswer:
    started = time.monotonic()
    try:
        answer = await request.fetch()
    except MCPError as error:
        reason = f"the server answered with a protocol error: {error}"
        await _finish(path, request, begun, started, {"kind": "answered", "is_error": True, "reason": reason})
        raise
    except DownstreamUnavailable as down:
        await _finish(path, request, begun, started, {"kind": "not_sent", "reason": str(down)})
        raise
    except ResultTooLarge as oversized:
        done = {"kind": "too_large", "reason": str(oversized), "size_bytes": oversized.size_bytes}
        await _finish(path, request, begun, started, done)
        raise
    except BaseException as lost:  # DownstreamLost, or the client went away (cancelled) while it was out
        why = str(lost) if isinstance(lost, DownstreamLost) else "the request was cancelled before the answer came"
        await _finish(path, request, begun, started, {"kind": "lost", "reason": why})
        raise
    dumped = answer.model_dump(by_alias=True, exclude_none=True, mode="json")
    scrubbed = path.downstreams.scrub(request.server, dumped)
    await _finish(path, request, begun, started, {"kind": "answered", "result": scrubbed, "is_error": False})
    return answer  # exactly what the downstream answered


async def _finish(
    path: DurablePath,
    request: ProxiedRead[Any],
    begun: dict[str, Any],
    started: float,
    outcome: dict[str, Any],
) -> None:
    outcome["max_result_bytes"] = path.config.max_result_bytes
    await path.record_outcome(request.principal, begun, started, outcome)


def _refusal(request: ProxiedRead[Any], reason: str, begun: dict[str, Any]) -> MCPError:
    why = reason.rstrip(".")
    text = (
        f"{request.method} {request.target} did NOT run and was not sent: {why}. Do not retry it and do not work "
        "around it with other tools; tell the user what you meant to read and why it was stopped, or carry on with "
        "what you may do."
    )
    facts = {
        "outcome": "refused",
        "server": request.server,
        "method": request.method,
        "class": "read",
        "code": begun.get("code", ""),
        "step_id": begun.get("step_id", ""),
        "saga_id": begun.get("saga_id", ""),
    }
    return MCPError(INVALID_REQUEST, text, data={PROXY_META_KEY: facts})
