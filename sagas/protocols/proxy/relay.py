"""The way back to the agent: what a downstream server asks of its client during a call (elicitation, sampling,
roots) and what it reports (progress, log messages) reach the client whose request is being served.

The downstream sessions are shared by every client of the proxy, and MCP's wire does not say which of our
requests a downstream's own request belongs to. So the router only relays when the answer is unambiguous: the
downstream's requests go to the one client that has requests in flight on that server (progress is matched by
its token and always goes to its call). With several clients in flight on one server, or none, the downstream
gets an error and nobody is asked: showing one user's elicitation to another would be worse than refusing.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from typing import Any, Protocol, TypeVar, get_args

import mcp.types as types
from mcp.server import ServerRequestContext
from mcp.server.connection import Connection, allowed_log_levels
from mcp.shared.exceptions import MCPError
from mcp.shared.message import ServerMessageMetadata
from mcp_types.jsonrpc import INVALID_REQUEST
from pydantic import BaseModel

logger = logging.getLogger("sagas.protocols.proxy")

ResultT = TypeVar("ResultT", bound=BaseModel)
SamplingAnswer = types.CreateMessageResult | types.CreateMessageResultWithTools | types.ErrorData


class ClientRelay(Protocol):
    """The back channel to the client of one proxied request."""

    @property
    def client_key(self) -> str:
        """Identifies the client connection (requests of one key go to the same agent)."""
        ...

    async def progress(self, progress: float, total: float | None = None, message: str | None = None) -> None:
        """Progress on the client's request; a no-op unless the client asked for progress."""
        ...

    async def log(self, params: types.LoggingMessageNotificationParams) -> None: ...

    async def elicit(self, params: types.ElicitRequestParams) -> types.ElicitResult | types.ErrorData: ...

    async def sample(self, params: types.CreateMessageRequestParams) -> SamplingAnswer: ...

    async def list_roots(self) -> types.ListRootsResult | types.ErrorData: ...


class _AskingRelay:
    """What both relays of an open request share: the level filter of log lines, and how the downstream's own
    requests (elicitation, sampling, roots) are asked, each refused with a reason when the client cannot take it."""

    def __init__(self, client_key: str, log_level: types.LoggingLevel | None) -> None:
        self._client_key = client_key
        self._log_level = log_level

    @property
    def client_key(self) -> str:
        return self._client_key

    def _logs(self, params: types.LoggingMessageNotificationParams, protocol_version: str, meta: Any) -> bool:
        """Whether the log line goes to the client: 2026-07-28 clients opt in per request (a level in _meta);
        handshake clients set a level with logging/setLevel, kept per connection."""
        if params.level not in allowed_log_levels(protocol_version, meta):
            return False
        return self._log_level is None or _LEVELS.index(params.level) >= _LEVELS.index(self._log_level)

    async def elicit(self, params: types.ElicitRequestParams) -> types.ElicitResult | types.ErrorData:
        capability = types.ClientCapabilities(elicitation=types.ElicitationCapability())
        if refusal := self._cannot_ask("elicitation", capability):
            return refusal
        return await self._ask(types.ElicitRequest(params=params), types.ElicitResult)

    async def sample(self, params: types.CreateMessageRequestParams) -> SamplingAnswer:
        if refusal := self._cannot_ask("sampling", types.ClientCapabilities(sampling=types.SamplingCapability())):
            return refusal
        request = types.CreateMessageRequest(params=params)
        if params.tools:
            return await self._ask(request, types.CreateMessageResultWithTools)
        return await self._ask(request, types.CreateMessageResult)

    async def list_roots(self) -> types.ListRootsResult | types.ErrorData:
        if refusal := self._cannot_ask("roots", types.ClientCapabilities(roots=types.RootsCapability())):
            return refusal
        return await self._ask(types.ListRootsRequest(), types.ListRootsResult)

    def _cannot_ask(self, what: str, capability: types.ClientCapabilities) -> types.ErrorData | None:
        raise NotImplementedError

    async def _ask(self, request: types.ServerRequest, result_type: type[ResultT]) -> ResultT | types.ErrorData:
        raise NotImplementedError


class RequestRelay(_AskingRelay):
    """The relay of one inbound request, over the SDK's request context: requests and notifications ride that
    request's stream (its SSE response on Streamable HTTP)."""

    def __init__(
        self, ctx: ServerRequestContext[Any], client_key: str, *, log_level: types.LoggingLevel | None
    ) -> None:
        super().__init__(client_key, log_level)
        self._ctx = ctx

    async def progress(self, progress: float, total: float | None = None, message: str | None = None) -> None:
        await self._ctx.session.report_progress(progress, total, message)

    async def log(self, params: types.LoggingMessageNotificationParams) -> None:
        if self._logs(params, self._ctx.protocol_version, self._ctx.meta):
            notification = types.LoggingMessageNotification(params=params)
            await self._ctx.session.send_notification(notification, related_request_id=self._ctx.request_id)

    def _cannot_ask(self, what: str, capability: types.ClientCapabilities) -> types.ErrorData | None:
        if not self._ctx.session.can_send_request:
            return types.ErrorData(
                code=INVALID_REQUEST,
                message=f"The agent's connection to the proxy cannot carry {what} requests (a 2026-07-28 stateless "
                "request has no back channel); it was not asked.",
            )
        if not self._ctx.session.check_client_capability(capability):
            return types.ErrorData(
                code=INVALID_REQUEST, message=f"The agent's client does not support {what}; it was not asked."
            )
        return None

    async def _ask(self, request: types.ServerRequest, result_type: type[ResultT]) -> ResultT | types.ErrorData:
        related = ServerMessageMetadata(related_request_id=self._ctx.request_id)
        try:
            return await self._ctx.session.send_request(request, result_type, metadata=related)
        except MCPError as refusal:
            return refusal.error


class ConnectionRelay(_AskingRelay):
    """The relay of a call the fast path answers (sagas.protocols.proxy.fast_calls): the stdio agent's one
    connection, with no SDK request context. The fast path takes no call that asked for progress, so progress goes
    nowhere; logs and the server's own requests go on the connection, as RequestRelay sends them on stdio."""

    def __init__(self, connection: Connection, client_key: str, *, log_level: types.LoggingLevel | None) -> None:
        super().__init__(client_key, log_level)
        self._connection = connection

    async def progress(self, progress: float, total: float | None = None, message: str | None = None) -> None:
        return None

    async def log(self, params: types.LoggingMessageNotificationParams) -> None:
        if self._logs(params, self._connection.protocol_version, None):
            dumped = params.model_dump(by_alias=True, exclude_none=True, mode="json")
            await self._connection.notify("notifications/message", dumped)

    def _cannot_ask(self, what: str, capability: types.ClientCapabilities) -> types.ErrorData | None:
        if not self._connection.check_capability(capability):
            return types.ErrorData(
                code=INVALID_REQUEST, message=f"The agent's client does not support {what}; it was not asked."
            )
        return None

    async def _ask(self, request: types.ServerRequest, result_type: type[ResultT]) -> ResultT | types.ErrorData:
        try:
            return await self._connection.send_request(request, result_type=result_type)
        except MCPError as refusal:
            return refusal.error


# Severity ascending, as the Literal declares them (the SDK orders levels the same way).
_LEVELS: tuple[str, ...] = get_args(types.LoggingLevel)


class Ambiguous(Exception):
    """Several clients have requests in flight on the server: the proxy cannot tell whose request this is."""


class RelayRouter:
    """Which client relay a downstream's own messages go to (see the module docstring)."""

    def __init__(self) -> None:
        self._in_flight: dict[str, list[ClientRelay]] = {}

    @contextlib.contextmanager
    def serving(self, server: str, relay: ClientRelay) -> Iterator[None]:
        """Mark `relay`'s request as in flight on `server` for the block."""
        relays = self._in_flight.setdefault(server, [])
        relays.append(relay)
        try:
            yield
        finally:
            relays.remove(relay)

    def route(self, server: str) -> ClientRelay | None:
        """The relay for a message from `server`: None when no request is in flight; Ambiguous when requests of
        several clients are."""
        relays = self._in_flight.get(server) or []
        if len({relay.client_key for relay in relays}) > 1:
            raise Ambiguous(server)
        return relays[0] if relays else None

    def refusal(self, server: str, what: str) -> types.ErrorData | ClientRelay:
        """The relay to ask, or the error the downstream gets instead."""
        try:
            relay = self.route(server)
        except Ambiguous:
            return types.ErrorData(
                code=INVALID_REQUEST,
                message=f"The proxy serves several agents with requests in flight on {server!r} and cannot tell which "
                f"one this {what} request is for, so it asked none. Retry when the other calls have finished.",
            )
        if relay is None:
            return types.ErrorData(
                code=INVALID_REQUEST,
                message=f"{what.capitalize()} requests are relayed to the agent only during one of its requests; "
                f"none of its requests is in flight on {server!r}, so nobody was asked.",
            )
        return relay

    async def log(self, server: str, params: types.LoggingMessageNotificationParams) -> None:
        """A downstream log message: to the client in flight, else (or when ambiguous) to the proxy's own log."""
        try:
            relay = self.route(server)
        except Ambiguous:
            relay = None
        if relay is not None:
            await relay.log(params)
            return
        logger.info("downstream %s logged (%s, %s): %s", server, params.level, params.logger or "-", params.data)
