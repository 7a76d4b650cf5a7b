"""Plain tools/call requests to a stdio downstream, beside its client session: the fast path's way down
(sagas.protocols.proxy.fast_calls).

The SDK's client session validates every message it sends and receives with pydantic and passes it through memory
streams; for a plain call whose answer is relayed as it came, that costs more than the downstream's own work. The
channel writes the request as one JSON line on the server's stdin (the same pipe the session writes to: a write is
one buffered write, never interleaved with another) under an id of its own (`saga-fast-N`, a string the session's
integer ids never take), and the transport's reader hands it back the one line that answers it, parsed once
(`answer_of`), through the session's read stream so that it comes after what the server sent before it (a log line
sent during the call still finds the call in flight). Everything else the server sends (its notifications, its own
requests, the session's answers) takes the session's path as before, through the same notification gate.

An answer past SAGA_PROXY_MAX_RESULT_BYTES arrives as the transport's synthesized error (result_cap), as it does for
the session. When the server's output ends, every call still waiting fails with DownstreamLost; one that times out
or is cancelled is withdrawn with notifications/cancelled, as the session withdraws its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import anyio
import mcp.types as types
from mcp.shared.exceptions import MCPError
from mcp_types.jsonrpc import INTERNAL_ERROR
from pydantic import ValidationError

ID_PREFIX = "saga-fast-"
_MARK = b'"' + ID_PREFIX.encode()
# A \uD800-\uDFFF escape: a lone one is valid JSON that no UTF-8 text can carry (the SDK refuses it).
_MAY_HOLD_SURROGATES = re.compile(rb"\\u[dD][89abAB]|\\u[dD][c-fC-F]")
# An answer the channel could not pass on: its error's data carries this key, and the call's outcome is unknown.
UNREADABLE = "io.semantic-saga/unreadable"
UNREADABLE_TEXT = "the server's answer holds text that cannot be passed on (a lone UTF-16 surrogate)"

Send = Callable[[bytes], Awaitable[None]]


class ChannelLost(Exception):
    """The server's output ended (it exited) or its input closed while the call was out."""


class ChannelClosed(Exception):
    """The channel is not attached to a running server: nothing was sent."""


@dataclass(frozen=True)
class RawAnswer:
    """An answer to a fast-path call, on its way through the session's read stream: the stream's reader
    (sagas.protocols.proxy.floods.GatedStream) delivers it to its call instead of passing it to the session, after
    every message the server sent before it (so a log line sent during the call still finds the call in flight)."""

    channel: RawChannel
    key: str
    message: dict[str, Any]

    def deliver(self) -> None:
        self.channel.deliver(self.key, self.message)


class RawChannel:
    def __init__(self) -> None:
        self._send: Send | None = None
        self._waiting: dict[str, asyncio.Future[dict[str, Any]]] = {}
        self._ids = itertools.count(1)

    def attach(self, send: Send) -> None:
        """The server is running: `send` writes bytes to its stdin."""
        self._send = send

    def detach(self, reason: str) -> None:
        """The server's output ended: every call still waiting is lost."""
        self._send = None
        waiting, self._waiting = self._waiting, {}
        for future in waiting.values():
            if not future.done():
                future.set_exception(ChannelLost(reason))

    @property
    def attached(self) -> bool:
        return self._send is not None

    def answer_of(self, line: bytes | dict[str, Any]) -> RawAnswer | None:
        """The answer to one of this channel's calls that `line` is (a raw line, or an answer the transport
        synthesized), else None. Cheap for every other line: one substring search. NaN and Infinity read as null
        (as the session reads them); an answer whose text cannot be passed on (a lone UTF-16 surrogate) becomes an
        unreadable answer (`UNREADABLE`): the call's outcome is then unknown."""
        if isinstance(line, bytes):
            if _MARK not in line:
                return None
            try:
                message = json.loads(line, parse_constant=_as_null)
            except (ValueError, RecursionError):
                return None
        else:
            message = line
        if not isinstance(message, dict) or "method" in message:
            return None  # the server's own request or notification, even one that borrows our id
        key = message.get("id")
        if not isinstance(key, str) or key not in self._waiting:
            return None
        if isinstance(line, bytes) and _MAY_HOLD_SURROGATES.search(line) and not text_of_json(message):
            message = {
                "id": key,
                "error": {"code": INTERNAL_ERROR, "message": UNREADABLE_TEXT, "data": {UNREADABLE: 1}},
            }
        return RawAnswer(self, key, message)

    def deliver(self, key: str, message: dict[str, Any]) -> None:
        future = self._waiting.pop(key, None)
        if future is not None and not future.done():
            future.set_result(message)

    async def call(self, params: dict[str, Any], timeout: float) -> dict[str, Any]:
        """Send tools/call with `params`; the JSON-RPC message that answers it (`result` or `error`). Raises
        ChannelClosed (not sent), ChannelLost (sent, no answer), TimeoutError (sent, withdrawn after `timeout`)."""
        send = self._send
        if send is None:
            raise ChannelClosed("the server is not running")
        key = f"{ID_PREFIX}{next(self._ids)}"
        line = _line({"jsonrpc": "2.0", "id": key, "method": "tools/call", "params": params})
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._waiting[key] = future
        try:
            await send(line)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError) as gone:
            self._waiting.pop(key, None)
            raise ChannelClosed(f"its input is closed ({type(gone).__name__})") from None
        # A timer rather than anyio.fail_after: its cancel scope costs more than the call on this path.
        expiry = asyncio.get_running_loop().call_later(timeout, _expire, future)
        try:
            return await future
        except BaseException:
            if self._waiting.pop(key, None) is not None:  # withdrawn before its answer: tell the server
                await self._cancel(key)
            raise
        finally:
            expiry.cancel()

    async def _cancel(self, key: str) -> None:
        notice = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": key}}
        send = self._send
        if send is None:
            return
        with anyio.CancelScope(shield=True), contextlib.suppress(Exception):
            await send(_line(notice))


def _expire(future: asyncio.Future[dict[str, Any]]) -> None:
    if not future.done():
        future.set_exception(TimeoutError())


def _as_null(constant: str) -> None:
    return None


def text_of_json(value: Any) -> bytes | None:
    """`value` written as UTF-8 JSON text, or None when it cannot be (a lone surrogate, or nested past what the
    interpreter walks)."""
    try:
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode("utf-8")
    except (UnicodeEncodeError, ValueError, RecursionError):
        return None


def strict_loads(line: bytes) -> Any:
    """The JSON value of an agent's line if the SDK would read it the same (no byte-order mark, no NaN or Infinity,
    no lone surrogate, nested at most DEEPEST levels: the SDK's parser refuses past about 200); ValueError
    otherwise, and the line takes the SDK's path, which answers it as it always did."""
    if line.startswith(_BOM):
        raise ValueError("a byte-order mark")  # Python's json skips it; the SDK's parser does not
    try:
        value = json.loads(line, parse_constant=_refuse_constant)
    except RecursionError:
        raise ValueError("nested too deep") from None
    if line.count(b"[") + line.count(b"{") > DEEPEST and _depth(value) > DEEPEST:
        raise ValueError("nested too deep")
    if _MAY_HOLD_SURROGATES.search(line) and text_of_json(value) is None:
        raise ValueError("a lone surrogate")
    return value


# Past this nesting a message is left to the SDK's parser (which stops near 200): no plain call is nested so deep.
DEEPEST = 100
_BOM = b"\xef\xbb\xbf"


def _depth(value: Any) -> int:
    """How deeply `value`'s arrays and objects nest (walked without recursion)."""
    deepest, pending = 0, [(value, 1)]
    while pending:
        item, level = pending.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else None
        if children is None:
            continue
        deepest = max(deepest, level)
        pending.extend((child, level + 1) for child in children)
    return deepest


def _refuse_constant(constant: str) -> None:
    raise ValueError(f"{constant} is not JSON")


def _line(message: dict[str, Any]) -> bytes:
    return json.dumps(message, separators=(",", ":"), ensure_ascii=False).encode("utf-8") + b"\n"


def plain_error(error: Any) -> MCPError:
    """The server's JSON-RPC error as the session would raise it."""
    if isinstance(error, dict) and isinstance(error.get("code"), int) and isinstance(error.get("message"), str):
        return MCPError(error["code"], error["message"], data=error.get("data"))
    return MCPError(INTERNAL_ERROR, "the server answered with an error that is not a JSON-RPC error object")


def plain_result(result: Any) -> dict[str, Any]:
    """A tools/call result as the server sent it, when it has the shape of one (checked without building models);
    otherwise read as the session reads it (MCPError when it is not a result at all)."""
    if _plainly_a_result(result):
        checked: dict[str, Any] = result
        return checked
    if isinstance(result, dict) and not isinstance(result.get("structuredContent", {}), dict):
        # An object in 2025-11-25, the era of the proxy's session with its servers (the version-free model is laxer).
        raise MCPError(
            INTERNAL_ERROR, "the server's answer is not a tools/call result (structuredContent not an object)"
        )
    try:
        types.CallToolResult.model_validate(result, by_name=False)
    except ValidationError as invalid:
        raise not_a_result("tools/call", invalid) from None
    valid: dict[str, Any] = result  # passed on as the server sent it, as a plain one is
    return valid


def unreadable(error: Any) -> bool:
    """Whether an error answer is the channel's own for an answer it could not pass on (answer_of)."""
    return isinstance(error, dict) and isinstance(error.get("data"), dict) and UNREADABLE in error["data"]


def not_a_result(method: str, invalid: ValidationError) -> MCPError:
    """The error an answer that is not a `method` result becomes (on both paths: the call is recorded failed)."""
    return MCPError(
        INTERNAL_ERROR, f"the server's answer is not a {method} result ({invalid.error_count()} problem(s))"
    )


def _plainly_a_result(result: Any) -> bool:
    """The shapes the session's CallToolResult accepts, checked without building it (anything else is built)."""
    if not isinstance(result, dict) or not isinstance(content := result.get("content"), list):
        return False
    if not all(isinstance(item, dict) and _plain_block(item) for item in content):
        return False
    if not isinstance(result.get("isError", False), bool):
        return False
    return all(isinstance(result.get(key, {}), dict) for key in ("structuredContent", "_meta"))


# What each content block type must carry, as strings (mcp_types' TextContent, ImageContent, ...).
_BLOCK_FIELDS: dict[str, tuple[str, ...]] = {
    "text": ("text",),
    "image": ("data", "mimeType"),
    "audio": ("data", "mimeType"),
    "resource_link": ("uri", "name"),
}


def _plain_block(item: dict[str, Any]) -> bool:
    kind = item.get("type")  # an embedded "resource" (its contents' shapes) is left to the model
    fields = _BLOCK_FIELDS.get(kind) if isinstance(kind, str) else None
    return fields is not None and all(isinstance(item.get(name), str) for name in fields)
