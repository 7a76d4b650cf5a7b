"""What a proxied tools/call is, and the pluggable path it takes to its downstream.

The proxy server turns each tools/call into a `ProxiedCall` (who asks, from which client connection, which
downstream tool under which definition hash, with which arguments, and the relay back to that client) and hands
it to a `CallPath`. `ForwardingCallPath` sends it straight to the downstream session. The durable path replaces it:
it can journal the call before forwarding, decide a gate, hold the call open (sending progress through the relay
while an operator decides) and then forward through the same `DownstreamManager.call_tool`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

import mcp.types as types
from mcp.shared.exceptions import MCPError
from mcp_types.jsonrpc import INVALID_REQUEST

from governance.identity.principal import Principal
from governance.identity.rbac import EXECUTE, can
from sagas.protocols.proxy.downstream import DownstreamLost, DownstreamManager, DownstreamUnavailable
from sagas.protocols.proxy.relay import ClientRelay
from sagas.protocols.proxy.result_cap import ResultTooLarge

# The result's `_meta` key under which the proxy says what happened to a call it could not complete.
PROXY_META_KEY = "io.semantic-saga/proxy"
# What a protocol read answers: a resources/read's ReadResourceResult or a prompts/get's GetPromptResult.
ReadAnswer = TypeVar("ReadAnswer", types.ReadResourceResult, types.GetPromptResult)


@dataclass(frozen=True)
class ClientIdentity:
    """The client connection a request came in on."""

    # One client connection (a random id kept for the connection's lifetime). A 2026-07-28 request is stateless:
    # it gets a fresh key each time, so key such sessions by principal and client_name instead.
    key: str
    session_id: str | None  # the Streamable HTTP mcp-session-id; None on stdio and for stateless requests
    protocol_version: str
    stateless: bool  # 2026-07-28: no session and no back channel for the server's own requests
    client_name: str | None = None
    client_version: str | None = None


@dataclass(frozen=True)
class ProxiedCall:
    principal: Principal
    client: ClientIdentity
    exposed_name: str  # the name the client called
    server: str  # the downstream server's name in the config
    tool: str  # the tool's downstream name
    definition_hash: str  # catalog.definition_hash of `definition`
    definition: types.Tool  # the downstream definition the catalog held when the call arrived
    arguments: dict[str, Any]
    meta: dict[str, Any]  # the client's _meta to pass on (its progress token and protocol envelope removed)
    relay: ClientRelay  # progress, logs and the server's own requests back to this client
    request_id: str | int | None = None
    # Whether the proxy can ask the person at this client (MCP elicitation): declared, and reachable in this era.
    client_elicits: bool = False
    # A 2026-07-28 retry of a call answered input_required: the person's answers and the state it came back with.
    input_responses: dict[str, Any] | None = None
    request_state: str | None = None


@dataclass(frozen=True)
class ProxiedRead(Generic[ReadAnswer]):
    """A resources/read or prompts/get: a read by the protocol (it changes nothing), forwarded as asked."""

    principal: Principal
    client: ClientIdentity
    method: str  # "resources/read" | "prompts/get"
    server: str  # the downstream server's name in the config
    target: str  # what the client named: the URI it read (prefix+uri) or the prompt name (prefix__name)
    arguments: dict[str, Any]  # what is journaled as the step's input: {"uri"} or {"name", "arguments"}
    listed: dict[str, Any]  # the catalog's definition of the resource, template or prompt ({} when none matched)
    fetch: Callable[[], Awaitable[ReadAnswer]]  # asks the downstream (the server built it with the relay)


class CallPath(Protocol):
    async def call(self, request: ProxiedCall) -> types.CallToolResult | types.InputRequiredResult:
        """Answer the call. The downstream's result as it came, or an isError result written for an LLM; a
        downstream JSON-RPC error may be raised as MCPError (the client gets it as the protocol error it was)."""
        ...

    async def read(self, request: ProxiedRead[ReadAnswer]) -> ReadAnswer:
        """Answer a resources/read or prompts/get with the downstream's answer; a refusal, or the downstream's own
        JSON-RPC error, is raised as MCPError; DownstreamUnavailable and DownstreamLost pass through."""
        ...

    def hidden(self, principal: Principal, client: ClientIdentity, server: str, tool: types.Tool) -> bool:
        """Whether tools/list leaves this downstream tool out for this caller (its gate is `hide`)."""
        ...

    async def client_initialized(self, principal: Principal, client: ClientIdentity) -> None:
        """A 2025-11-25 client finished its handshake (a stateless client never does)."""
        ...

    async def aclose(self) -> None:
        """The proxy stops: release what the path holds (database connections)."""
        ...


class ForwardingCallPath:
    """Straight to the downstream session: nothing journaled, gated or held. A caller without the execute
    capability (a viewer) is refused. In preview only tools that declare `readOnlyHint` are forwarded; the durable
    path, with the full classification, records the others as dry steps."""

    def __init__(self, downstreams: DownstreamManager, *, preview: bool = False) -> None:
        self.downstreams = downstreams
        self.preview = preview

    def hidden(self, principal: Principal, client: ClientIdentity, server: str, tool: types.Tool) -> bool:
        return False  # nothing is gated on this path

    async def client_initialized(self, principal: Principal, client: ClientIdentity) -> None:
        return None  # nothing is journaled on this path

    async def aclose(self) -> None:
        return None

    async def read(self, request: ProxiedRead[ReadAnswer]) -> ReadAnswer:
        refuse_viewer_read(request)
        return await request.fetch()

    async def call(self, request: ProxiedCall) -> types.CallToolResult:
        if not can(request.principal, EXECUTE):
            return refused_result(
                request,
                f"{request.principal.principal_id} may read but not act (calling a tool needs the agent, operator or "
                "admin role)",
            )
        annotations = request.definition.annotations
        if self.preview and not (annotations and annotations.read_only_hint):
            return refused_result(request, "this is a preview session and the tool does not declare itself read-only")
        try:
            return await self.downstreams.call_tool(
                request.server, request.tool, request.arguments, relay=request.relay, meta=request.meta
            )
        except DownstreamUnavailable as down:
            return not_sent_result(request, str(down))
        except DownstreamLost as lost:
            return uncertain_result(request, str(lost))
        except ResultTooLarge as oversized:
            return too_large_result(request, oversized)


def refuse_viewer_read(request: ProxiedRead[Any]) -> None:
    """As a tools/call of a read-class tool, a resources/read or prompts/get needs the execute capability: the
    journaled path records it as a step of the session, which a viewer may not add to."""
    if not can(request.principal, EXECUTE):
        raise MCPError(
            INVALID_REQUEST,
            f"{request.method} {request.target} did not run and was not sent: {request.principal.principal_id} may "
            "list but not act (every read through the proxy is recorded as a step of a session, which needs the "
            "agent, operator or admin role). Do not retry it; ask an administrator for the agent role, or carry on "
            "with what you may do.",
            data={PROXY_META_KEY: {"outcome": "refused", "server": request.server, "method": request.method}},
        )


def refused_result(request: ProxiedCall, reason: str) -> types.CallToolResult:
    text = (
        f"{request.exposed_name} did not run and was not sent: {reason}. Do not retry it or work around it with "
        "other tools; tell the user what you meant to do, or carry on with what you may do."
    )
    return _error(text, request, "refused", reason)


def unjournalable_result(request: ProxiedCall, problem: str) -> types.CallToolResult:
    """A call whose arguments the journal cannot store (sagas.operations.arguments.storable_problem): refused before
    anything is written or sent, in words that let the agent fix the call."""
    text = f"{request.exposed_name} did not run and was not sent: {problem}. Fix the arguments and call it again."
    return _error(text, request, "refused", problem)


def not_sent_result(request: ProxiedCall, reason: str) -> types.CallToolResult:
    text = (
        f"{request.exposed_name} did not run: {reason}. Nothing was sent to that server, so nothing changed. The "
        "proxy reconnects by itself: try again in a little while, or carry on with other tools meanwhile."
    )
    return _error(text, request, "not_sent", reason)


def capture_failed_result(request: ProxiedCall, reason: str) -> types.CallToolResult:
    text = (
        f"{request.exposed_name} did not run: {reason}. Nothing was sent, so nothing changed. The state it would "
        "change could not be read first (does the thing exist? are the arguments right?); check them before trying "
        "again: the same arguments will fail the same way."
    )
    return _error(text, request, "not_sent", reason)


def uncertain_result(request: ProxiedCall, reason: str) -> types.CallToolResult:
    text = (
        f"{request.exposed_name} was sent, but {reason}: it may or may not have acted. Do not simply call it again, "
        "which could apply it twice: first check whether its effect happened (with a read tool of the same server), "
        "or tell the user that the outcome is unknown."
    )
    return _error(text, request, "uncertain", reason)


def too_large_result(request: ProxiedCall, oversized: ResultTooLarge) -> types.CallToolResult:
    size = f"{oversized.size_bytes} bytes" if oversized.size_bytes is not None else "an answer"
    text = (
        f"{request.exposed_name} answered with {size}, more than this proxy passes on to an agent "
        f"({oversized.limit_bytes} bytes, SAGA_PROXY_MAX_RESULT_BYTES), so its answer was not read. It ran: whatever "
        "it does, it did. Ask it for less (a page, a filter, a narrower range) if it has a way to, or tell the user."
    )
    return _error(text, request, "too_large", str(oversized))


def _error(text: str, request: ProxiedCall, outcome: str, reason: str) -> types.CallToolResult:
    facts = {"outcome": outcome, "server": request.server, "tool": request.tool, "reason": reason}
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=text)],
        is_error=True,
        _meta={PROXY_META_KEY: facts},
    )
