"""The fast path of the proxy over Streamable HTTP: a plain tools/call of a handshake-era session (2024-11-05 to
2025-11-25) answered with one JSON body, without the SDK's session transport, server runner or SSE stream
(docs/proxy.md, "The fast path").

Over HTTP the SDK passes each POST through its session manager, its transport (the body validated into pydantic
models), memory streams to the session's server task, the request's dispatch, and back out as a server-sent event
stream: several milliseconds per call, more than the journal's whole cost. This endpoint sits between the bearer
authentication and the SDK's app and takes a POST only when all of this holds, else the SDK's app serves it
exactly as before (a body already read is handed on unchanged):

- its path is /proxy/mcp, its MCP session is one the SDK's manager holds (not ended, not idle past its timeout),
  opened with the same credential, whose handshake finished at the protocol version the request's header names;
- it passes the SDK's own DNS-rebinding checks (Host, Origin, Content-Type), accepts both JSON and event streams
  as the SDK requires, and declares a Content-Length within SAGA_MAX_REQUEST_BYTES (and 1 MiB);
- the body is a plain tools/call (sagas.protocols.proxy.fast_calls: `plain_call`), and the call is one the stdio
  fast path would take for that connection and principal.

The answer is `application/json` (the spec lets a server answer a POST with either), with the session id header;
meanwhile the session counts as busy for its idle timeout, as the SDK counts a request it serves. A client's
notifications/cancelled for a call in flight here withdraws it (202), and the call is answered as the SDK's
transport answers a cancelled request of this era (REQUEST_CANCELLED).
"""

from __future__ import annotations

import asyncio
import contextlib
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import anyio
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser, authorization_context
from mcp.server.connection import Connection
from mcp.server.streamable_http import MCP_SESSION_ID_HEADER, StreamableHTTPServerTransport, check_accept_headers
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecurityMiddleware
from mcp.shared.exceptions import MCPError
from mcp.shared.inbound import MCP_PROTOCOL_VERSION_HEADER
from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from governance.identity.principal import Principal
from sagas.protocols.proxy.calls import ClientIdentity
from sagas.protocols.proxy.durable import DurableCallPath
from sagas.protocols.proxy.fast_calls import FastDecider, Flight, PlainCall, answered, framed, plain_call
from sagas.protocols.proxy.raw_channel import strict_loads
from sagas.protocols.proxy.server import ProxyServer
from sagas.protocols.proxy.stdio_front import request_key

# A body past this goes to the SDK unread: a plain call is small, and its JSON is parsed whole here.
FAST_BODY_BYTES = 1024 * 1024
# The 2025-11-25 transport's answer to a request the client cancelled (the SDK's REQUEST_CANCELLED).
REQUEST_CANCELLED = -32800
_SESSION_HEADER = MCP_SESSION_ID_HEADER.lower().encode("latin-1")
_VERSION_HEADER = MCP_PROTOCOL_VERSION_HEADER.lower().encode("latin-1")


@dataclass(frozen=True)
class _Target:
    """A POST the fast path may take, once its body says what it is."""

    session_id: str
    transport: StreamableHTTPServerTransport
    client: ClientIdentity
    connection: Connection
    principal: Principal


class FastHttpEndpoint:
    """ASGI: the fast path in front of the SDK's Streamable HTTP app (module docstring)."""

    def __init__(
        self,
        sdk_app: ASGIApp,
        server: ProxyServer,
        path: DurableCallPath,
        principal_for_request: Callable[[], Principal],
        *,
        path_served: str,
        max_body_bytes: int,
    ) -> None:
        self._sdk_app = sdk_app
        self._server = server
        self._decider = FastDecider(server, path)
        self._principal = principal_for_request
        self._path = path_served
        self._max_body = min(max_body_bytes, FAST_BODY_BYTES)
        self._security: TransportSecurityMiddleware | None = None
        self._flights: dict[tuple[str, Any], Flight] = {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] == "POST" and scope["path"] == self._path:
            target = await self._target(scope, receive)
            if target is not None:
                body = await _body(receive)
                if body is None:
                    return  # the client went away before it finished sending
                if await self._served(target, body, send):
                    return
                receive = _replayed(body, receive)
        await self._sdk_app(scope, receive, send)

    # --- whether to look at the body ---------------------------------------------------------------------------

    async def _target(self, scope: Scope, receive: Receive) -> _Target | None:
        headers = dict(scope["headers"])
        session_id = headers.get(_SESSION_HEADER, b"").decode("latin-1")
        manager = self._manager()
        # The manager's own tables (SDK 2.3): the session's transport and the credential that opened it.
        transport = manager._server_instances.get(session_id) if session_id else None
        if transport is None or transport.is_terminated or _idle_ended(transport):
            return None
        user = scope.get("user")
        if manager._session_owners.get(session_id) != (
            authorization_context(user) if isinstance(user, AuthenticatedUser) else None
        ):
            return None  # the SDK answers it as a session that does not exist
        found = self._server.clients.by_session.get(session_id)
        version = headers.get(_VERSION_HEADER, b"").decode("latin-1")
        if found is None or version != found[0].protocol_version or not _small(headers, self._max_body):
            return None
        request = Request(scope, receive)
        if await self._security_for(manager).validate_request(request, is_post=True) is not None:
            return None
        if check_accept_headers(request) != (True, True):
            return None
        principal = self._principal()
        if not self._decider.acts(principal):
            return None
        return _Target(session_id, transport, found[0], found[1], principal)

    def _manager(self) -> StreamableHTTPSessionManager:
        manager: StreamableHTTPSessionManager = self._server.session_manager
        return manager

    def _security_for(self, manager: StreamableHTTPSessionManager) -> TransportSecurityMiddleware:
        if self._security is None:
            self._security = TransportSecurityMiddleware(manager.security_settings)
        return self._security

    # --- serving it ----------------------------------------------------------------------------------------------

    async def _served(self, target: _Target, body: bytes, send: Send) -> bool:
        """Whether the fast path answered the request (else the SDK's app serves it)."""
        try:
            message = strict_loads(body)
        except ValueError:  # not JSON the SDK reads the same: its path answers it
            return False
        method = message.get("method") if isinstance(message, dict) else None
        if method == "tools/call":
            call = plain_call(message)
            if call is None or (target.session_id, request_key(call.request_id)) in self._flights:
                return False
            return await self._call(target, call, send)
        if method == "notifications/cancelled":
            return await self._cancel(target, message, send)
        return False

    async def _call(self, target: _Target, call: PlainCall, send: Send) -> bool:
        taken = self._decider.request(call, target.principal, target.client, target.connection)
        if taken is None:
            return False
        key = (target.session_id, request_key(call.request_id))
        flight = self._flights[key] = Flight()
        try:
            with _busy(target.transport):
                flight.task = asyncio.get_running_loop().create_task(answered(self._decider, call, taken, flight))
                answer = await flight.task
        finally:
            self._flights.pop(key, None)
        if answer is None and not flight.withdrawn:
            return False  # the read's quick check did not clear it: the SDK path decides and journals it
        if answer is None:
            answer = MCPError(REQUEST_CANCELLED, "Request cancelled")
        await _respond(send, 200, target.session_id, framed(call, answer).rstrip(b"\n"))
        return True

    async def _cancel(self, target: _Target, message: dict[str, Any], send: Send) -> bool:
        """A notifications/cancelled for a call in flight here: withdrawn, and the notification accepted."""
        try:
            flight = self._flights.get((target.session_id, request_key(message["params"]["requestId"])))
        except (TypeError, KeyError):
            return False
        if flight is None or flight.task is None:
            return False
        flight.withdrawn = True
        flight.task.cancel()
        await _respond(send, 202, target.session_id, b"")
        return True


def _idle_ended(transport: StreamableHTTPServerTransport) -> bool:
    return transport.idle_scope is not None and transport.idle_scope.cancel_called


def _small(headers: dict[bytes, bytes], limit: int) -> bool:
    try:
        return 0 < int(headers.get(b"content-length", b"")) <= limit
    except ValueError:
        return False


@contextlib.contextmanager
def _busy(transport: StreamableHTTPServerTransport) -> Iterator[None]:
    """The session is in use for its idle timeout, as the SDK's transport counts a request it serves (its own
    counter, so the two paths share one count)."""
    idle, timeout = transport.idle_scope, transport._idle_timeout
    if idle is None or timeout is None:
        yield
        return
    transport._requests_in_flight += 1
    idle.deadline = math.inf
    try:
        yield
    finally:
        transport._requests_in_flight -= 1
        if not transport._requests_in_flight:
            idle.deadline = anyio.current_time() + timeout


async def _body(receive: Receive) -> bytes | None:
    """The whole body (its length was checked first); None if the client disconnected."""
    chunks: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            return b"".join(chunks)


def _replayed(body: bytes, receive: Receive) -> Receive:
    """`receive` for the SDK's app with the body this endpoint already read: given once, then the client's own."""
    pending: list[Message] = [{"type": "http.request", "body": body, "more_body": False}]

    async def replay() -> Message:
        return pending.pop() if pending else await receive()

    return replay


async def _respond(send: Send, status: int, session_id: str, body: bytes) -> None:
    headers = [(b"content-type", b"application/json"), (_SESSION_HEADER, session_id.encode("latin-1"))]
    headers.append((b"content-length", str(len(body)).encode("ascii")))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
