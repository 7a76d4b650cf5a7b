"""Plain tools/call requests to a Streamable HTTP downstream, beside its client session: the fast path's way down
over HTTP (the stdio twin is sagas.protocols.proxy.raw_channel).

The SDK's client session validates every message into pydantic models and passes it through memory streams and a
task per request; for a plain call whose answer is relayed as it came, that costs more than the downstream's own
work. The channel POSTs the call itself, on the session's own HTTP client (its headers, its connection pool, its
body bound), with the session's id (read from the server's answers as they pass: `observe`) and the protocol
version its handshake agreed, under an id of its own (`saga-fast-N`). The answer is parsed once:

- an `application/json` body is the answer;
- a `text/event-stream` body is read event by event: the event that answers the call is its answer, and every other
  message the server sent on it (a log line, progress, its own request during the call) is handed to the session as
  if it had come on the session's own streams (`merged`), in order, so it reaches the agent as on the SDK path;
- an error status is answered as the SDK's transport answers it (the server's JSON-RPC error if the body holds one,
  404 "Session terminated", else "Server returned an error response"); a redirect, which the SDK may follow, and an
  answer from a server that is not speaking this era are declined (`ChannelDeclined`): nothing was done, and the call
  goes through the session.

Sent and not answered (the connection broke, the stream ended first) is ChannelLost; not sent at all (the
connection could not be made) is ChannelClosed; past its timeout or cancelled, the call is withdrawn with a
notifications/cancelled, as the session withdraws its own.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import itertools
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import anyio
import httpx2
import mcp.types as types
from mcp.shared.message import SessionMessage
from mcp_types import JSONRPCNotification, jsonrpc_message_adapter
from mcp_types.jsonrpc import INTERNAL_ERROR, INVALID_REQUEST
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from sagas.protocols.proxy.raw_channel import (
    _MAY_HOLD_SURROGATES,
    ID_PREFIX,
    UNREADABLE,
    UNREADABLE_TEXT,
    ChannelClosed,
    ChannelLost,
    text_of_json,
)
from sagas.protocols.proxy.result_cap import TOO_LARGE_CODE, TOO_LARGE_KEY

_SESSION_HEADER = "mcp-session-id"
Admit = Callable[[SessionMessage], bool]  # the downstream's notification gate (sagas.protocols.proxy.floods)
Log = Callable[[types.LoggingMessageNotificationParams], Awaitable[None]]  # its log line, on to the agent
_ACCEPT = "application/json, text/event-stream"


class ChannelDeclined(Exception):
    """The server did not take the request (a redirect; an era this channel does not speak): ask the session."""


class HttpChannel:
    def __init__(self, url: str, limit: int) -> None:
        self.url = url
        self.limit = limit
        self.session_id: str | None = None
        self.protocol_version: str | None = None  # set once the session's handshake agreed one
        self._client: httpx2.AsyncClient | None = None
        self._ids = itertools.count(1)
        self._injected: InjectableStream | None = None
        self._admit: Admit | None = None
        self._log: Log | None = None

    # --- wiring, by the connection --------------------------------------------------------------------------------

    def attach(self, client: httpx2.AsyncClient) -> None:
        """The session's HTTP client (its headers, pool and body bound) is ready."""
        self._client = client

    def observe(self, response: httpx2.Response) -> None:
        """Every response of the server, as it passes: the session id it names, once it names one."""
        if session_id := response.headers.get(_SESSION_HEADER):
            self.session_id = session_id

    def merged(self, stream: Any, admit: Admit, log: Log) -> InjectableStream:
        """The session's read stream, with what the server sent on a plain call's event stream besides its answer;
        a log line among it goes to `log` at once (if `admit`, the notification gate, lets it), while the call is
        still in flight and so still finds its agent."""
        self._injected = InjectableStream(stream)
        self._admit, self._log = admit, log
        return self._injected

    def handshake_done(self, protocol_version: str) -> None:
        self.protocol_version = protocol_version

    @property
    def attached(self) -> bool:
        """Ready for plain calls: the handshake done in a handshake era (2026-07-28 wants an envelope per call)."""
        version = self.protocol_version
        return self._client is not None and version is not None and version not in MODERN_PROTOCOL_VERSIONS

    # --- the call -----------------------------------------------------------------------------------------------

    async def call(self, params: dict[str, Any], timeout: float) -> dict[str, Any]:
        """POST tools/call with `params`; the JSON-RPC message that answers it (`result` or `error`). Raises
        ChannelClosed (not sent), ChannelLost (sent, no answer), ChannelDeclined (not taken: ask the session),
        TimeoutError (sent, withdrawn after `timeout`)."""
        client = self._client
        if client is None or self.protocol_version is None:
            raise ChannelClosed("the session is not connected")
        key = f"{ID_PREFIX}{next(self._ids)}"
        body = json.dumps({"jsonrpc": "2.0", "id": key, "method": "tools/call", "params": params}, ensure_ascii=False)
        try:
            async with asyncio.timeout(timeout):
                return await self._post(client, key, body.encode("utf-8"))
        except (TimeoutError, asyncio.CancelledError):
            await self._cancel(client, key)
            raise

    def _headers(self) -> dict[str, str]:
        headers = {"content-type": "application/json", "accept": _ACCEPT}
        headers["mcp-protocol-version"] = self.protocol_version or ""
        if self.session_id:
            headers[_SESSION_HEADER] = self.session_id
        return headers

    async def _post(self, client: httpx2.AsyncClient, key: str, body: bytes) -> dict[str, Any]:
        request = client.build_request("POST", self.url, content=body, headers=self._headers())
        try:
            response = await client.send(request, stream=True, follow_redirects=False)
        except httpx2.ConnectError as refused:
            raise ChannelClosed(f"no connection ({type(refused).__name__})") from None
        except httpx2.TransportError as broke:
            raise ChannelLost(f"the request failed ({type(broke).__name__})") from None
        try:
            return await self._answer(response, key)
        except (httpx2.TransportError, httpx2.StreamError) as broke:
            if _SIZE_MARK in str(broke):
                return _too_large(key, self.limit)
            raise ChannelLost(f"the answer broke off ({type(broke).__name__})") from None
        finally:
            await response.aclose()

    async def _answer(self, response: httpx2.Response, key: str) -> dict[str, Any]:
        status = response.status_code
        kind = response.headers.get("content-type", "").split(";")[0].strip().lower()
        if 300 <= status < 400:
            raise ChannelDeclined(f"the server redirected the call ({status})")
        if status >= 400:
            return await self._refusal(response, key, kind)
        if kind == "application/json":
            return _message_for(await response.aread(), key)
        if kind == "text/event-stream":
            return await self._events(response, key)
        raise ChannelLost(f"the server answered {status} with content type {kind or 'none'}")

    async def _refusal(self, response: httpx2.Response, key: str, kind: str) -> dict[str, Any]:
        """An error status, as the SDK's transport reads it."""
        if kind == "application/json":
            with contextlib.suppress(ValueError, httpx2.StreamError):
                parsed = json.loads(await response.aread())
                if isinstance(parsed, dict) and isinstance(parsed.get("error"), dict):
                    return {"id": key, "error": parsed["error"]}
        if response.status_code == 404:
            return {"id": key, "error": {"code": INVALID_REQUEST, "message": "Session terminated"}}
        return {"id": key, "error": {"code": INTERNAL_ERROR, "message": "Server returned an error response"}}

    async def _events(self, response: httpx2.Response, key: str) -> dict[str, Any]:
        injected = False
        try:
            async for event in httpx2.EventSource(response, max_event_size=self.limit):
                if event.event != "message" or not event.data:
                    continue
                answer = _answer_in(event.data, key)
                if answer is None:
                    injected = await self._pass_on(event.data) or injected
                    continue
                if injected and self._injected is not None:
                    # What the server sent before its answer reaches the session first, while the call is still in
                    # flight (so a log line still finds the agent to go to).
                    await self._injected.passed()
                return answer
        except httpx2.SSEError as error:
            if "limit" in str(error):
                return _too_large(key, self.limit)
            raise ChannelLost(f"the event stream could not be read ({error})") from None
        raise ChannelLost("the event stream ended before the answer")

    async def _pass_on(self, data: str) -> bool:
        """A message the server sent during the call: a log line to the agent now, anything else to the session (as
        its transport would have passed it). Whether something was handed to the session."""
        if self._injected is None or self._admit is None or self._log is None:
            return False
        try:
            message = SessionMessage(jsonrpc_message_adapter.validate_json(data, by_name=False))
        except ValueError as invalid:
            self._injected.inject(invalid)
            return True
        inner = message.message
        if not isinstance(inner, JSONRPCNotification) or inner.method != "notifications/message":
            self._injected.inject(message)
            return True
        if self._admit(message):
            with contextlib.suppress(ValueError):
                await self._log(types.LoggingMessageNotificationParams.model_validate(inner.params or {}))
        return False

    async def _cancel(self, client: httpx2.AsyncClient, key: str) -> None:
        notice = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": key}}
        with anyio.CancelScope(shield=True), contextlib.suppress(Exception), anyio.fail_after(5):
            response = await client.post(self.url, content=json.dumps(notice).encode(), headers=self._headers())
            await response.aclose()


_SIZE_MARK = "exceeds the proxy's limit"


def _answer_in(data: str, key: str) -> dict[str, Any] | None:
    """The answer to the call `key` that an event's data is, else None (a message of the server's own)."""
    if key not in data:
        return None
    try:
        message = json.loads(data, parse_constant=_as_null)
    except (ValueError, RecursionError):
        return None
    if not isinstance(message, dict) or "method" in message or message.get("id") != key:
        return None
    return _readable(message, data.encode("utf-8", "surrogatepass"), key)


def _message_for(body: bytes, key: str) -> dict[str, Any]:
    """The answer a JSON body holds. A body that is not the answer to this call (unreadable, another id, not an
    answer at all) leaves the call's outcome unknown: the server received it and may have acted (ChannelLost)."""
    try:
        message = json.loads(body, parse_constant=_as_null)
    except (ValueError, RecursionError):
        raise ChannelLost("the server answered with a body that is not JSON") from None
    if not isinstance(message, dict) or message.get("id") != key or "method" in message:
        raise ChannelLost("the server answered with a JSON body that does not answer this call")
    return _readable(message, body, key)


def _readable(message: dict[str, Any], raw: bytes, key: str) -> dict[str, Any]:
    """`message`, or the unreadable answer when its text cannot be passed on (a lone UTF-16 surrogate)."""
    if _MAY_HOLD_SURROGATES.search(raw) and text_of_json(message) is None:
        return {"id": key, "error": {"code": INTERNAL_ERROR, "message": UNREADABLE_TEXT, "data": {UNREADABLE: 1}}}
    return message


def _too_large(key: str, limit: int) -> dict[str, Any]:
    error = {"code": TOO_LARGE_CODE, "message": f"the answer was past the proxy's limit of {limit} bytes"}
    error["data"] = {TOO_LARGE_KEY: {"size_bytes": None, "limit_bytes": limit}}
    return {"id": key, "error": error}


def _as_null(constant: str) -> None:
    return None


@dataclass(frozen=True)
class _Passed:
    marker: asyncio.Future[None]


class InjectableStream:
    """A read stream (the SDK's ReadStream protocol) that also yields what `inject` hands it, in order, ahead of
    what its inner stream has not yet delivered."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self._injected: collections.deque[Any] = collections.deque()
        self._waiting: asyncio.Future[None] | None = None
        self._pending: asyncio.Task[Any] | None = None

    @property
    def last_context(self) -> Any:
        return getattr(self._inner, "last_context", None)

    def inject(self, item: Any) -> None:
        self._injected.append(item)
        if self._waiting is not None and not self._waiting.done():
            self._waiting.set_result(None)

    async def passed(self) -> None:
        """Once the reader took everything injected so far."""
        marker: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.inject(_Passed(marker))
        await marker

    async def receive(self) -> Any:
        while True:
            while not self._injected:
                if self._pending is None:
                    self._pending = asyncio.ensure_future(self._inner.receive())
                self._waiting = asyncio.get_running_loop().create_future()
                await asyncio.wait({self._pending, self._waiting}, return_when=asyncio.FIRST_COMPLETED)
                if self._pending.done():
                    pending, self._pending = self._pending, None
                    return pending.result()  # raises what the inner stream raised (its end, say)
            item = self._injected.popleft()
            if not isinstance(item, _Passed):
                return item
            if not item.marker.done():
                item.marker.set_result(None)

    async def aclose(self) -> None:
        if self._pending is not None:
            self._pending.cancel()
        await self._inner.aclose()
