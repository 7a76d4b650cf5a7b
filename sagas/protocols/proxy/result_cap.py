"""The bound on a downstream's answer the proxy reads (SAGA_PROXY_MAX_RESULT_BYTES): past it, the rest is never
buffered and the request it answers ends with a `ResultTooLarge` instead.

A downstream could otherwise make the proxy hold, journal and pass on any amount (a 50 MB answer took the proxy to
390 MB). The bound is applied where the bytes arrive, per transport:

- stdio (`LineCap`, used by sagas.protocols.proxy.stdio_transport): a message is one line; a line past the limit
  is counted and dropped as it streams in, keeping only its first and last few hundred bytes to find the JSON-RPC id
  it answers, and that request is answered with a synthesized error carrying `TOO_LARGE_KEY` in its data;
- Streamable HTTP: an SSE event past the limit is refused by the SDK's own bound (`max_sse_event_size`), and a JSON
  body past it by `CappedBodies`, an httpx transport that stops reading it. Both reach the request as an MCPError
  whose message says so.

`too_large(error)` turns any of the three into a `ResultTooLarge`.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import httpx2
from mcp.shared.exceptions import MCPError

TOO_LARGE_KEY = "io.semantic-saga/result_too_large"
# The JSON-RPC error code of a synthesized answer (the implementation-defined server-error range).
TOO_LARGE_CODE = -32050
# Bytes kept from each end of an oversized line: enough to find its id, whichever end the sender put it at.
_EDGE = 512
_ID_FIRST = re.compile(rb'^\s*\{\s*(?:"jsonrpc"\s*:\s*"2\.0"\s*,\s*)?"id"\s*:\s*("(?:[^"\\]|\\.){0,200}"|-?\d{1,20})')
_ID_LAST = re.compile(rb',\s*"id"\s*:\s*("(?:[^"\\]|\\.){0,200}"|-?\d{1,20})\s*\}\s*$')
_SSE_LIMIT = re.compile(r"exceeded the (\d+) byte limit")
_BODY_MARK = "response body exceeds the proxy's limit of "


class ResultTooLarge(Exception):
    """The downstream answered, but with more than the proxy reads (`size_bytes` is at least what it sent)."""

    def __init__(self, size_bytes: int | None, limit_bytes: int) -> None:
        self.size_bytes = size_bytes
        self.limit_bytes = limit_bytes
        size = f"{size_bytes} bytes" if size_bytes is not None else "more bytes"
        super().__init__(f"it answered with {size}, past the proxy's limit of {limit_bytes} bytes")


@dataclass(frozen=True)
class Oversized:
    """A line past the limit: how long it was, and the JSON-RPC id it answered (None when none could be found)."""

    size_bytes: int
    request_id: str | int | None


class LineCap:
    """Splits a byte stream into lines of at most `limit` bytes; a longer line becomes `Oversized`."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._line = bytearray()
        self._size = 0
        self._tail = b""

    def feed(self, chunk: bytes) -> list[bytes | Oversized]:
        found: list[bytes | Oversized] = []
        start = 0
        while (end := chunk.find(b"\n", start)) >= 0:
            self._add(chunk[start:end])
            found.append(self._finish())
            start = end + 1
        if start < len(chunk):
            self._add(chunk[start:])
        return found

    def _add(self, piece: bytes) -> None:
        was = self._size
        self._size += len(piece)
        if self._size <= self.limit:
            self._line += piece
            return
        # Past the limit: keep only the line's head and a rolling tail (for the id), never the rest.
        if was <= self.limit:
            self._tail = bytes(self._line[-_EDGE:])
        self._tail = (self._tail + piece[-_EDGE:])[-_EDGE:]
        if len(self._line) < _EDGE:
            self._line += piece[: _EDGE - len(self._line)]
        del self._line[_EDGE:]

    def _finish(self) -> bytes | Oversized:
        line, size, tail = bytes(self._line), self._size, self._tail
        self._line, self._size, self._tail = bytearray(), 0, b""
        if size <= self.limit:
            return line
        return Oversized(size, _request_id(line, tail))


def _request_id(head: bytes, tail: bytes) -> str | int | None:
    found = _ID_FIRST.match(head) or _ID_LAST.search(tail)
    if found is None:
        return None
    try:
        value = json.loads(found.group(1))
    except ValueError:
        return None
    return value if isinstance(value, str | int) else None


def synthesized_answer(oversized: Oversized, limit: int) -> dict[str, Any]:
    """The JSON-RPC error the proxy reads in place of an oversized answer."""
    return {
        "jsonrpc": "2.0",
        "id": oversized.request_id,
        "error": {
            "code": TOO_LARGE_CODE,
            "message": f"the answer was {oversized.size_bytes} bytes, past the proxy's limit of {limit}",
            "data": {TOO_LARGE_KEY: {"size_bytes": oversized.size_bytes, "limit_bytes": limit}},
        },
    }


def too_large(error: MCPError, limit: int) -> ResultTooLarge | None:
    """The ResultTooLarge an MCPError stands for, if it is one (see the module docstring)."""
    data = error.error.data
    if isinstance(data, dict) and isinstance(marked := data.get(TOO_LARGE_KEY), dict):
        size = marked.get("size_bytes")
        return ResultTooLarge(size if isinstance(size, int) else None, limit)
    if (found := _SSE_LIMIT.search(error.error.message)) is not None:
        return ResultTooLarge(None, int(found.group(1)))
    if _BODY_MARK in error.error.message:
        return ResultTooLarge(None, limit)
    return None


class CappedBodies(httpx2.AsyncBaseTransport):
    """An httpx transport whose JSON response bodies stop being read past `limit` bytes (SSE streams are bounded
    per event by the SDK; they may legitimately carry any number of events)."""

    def __init__(
        self,
        limit: int,
        inner: httpx2.AsyncBaseTransport | None = None,
        observe: Callable[[httpx2.Response], None] | None = None,
    ) -> None:
        self.limit = limit
        self.inner = inner or httpx2.AsyncHTTPTransport()
        self.observe = observe  # told of every response as it arrives (its headers; the body not yet read)

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        response = await self.inner.handle_async_request(request)
        if self.observe is not None:
            self.observe(response)
        if not response.headers.get("content-type", "").lower().startswith("application/json"):
            return response
        response.stream = _CappedStream(response.stream, self.limit)
        return response

    async def aclose(self) -> None:
        await self.inner.aclose()


class _CappedStream(httpx2.AsyncByteStream):
    def __init__(self, inner: Any, limit: int) -> None:
        self.inner = inner
        self.limit = limit

    async def __aiter__(self) -> AsyncIterator[bytes]:
        read = 0
        async for chunk in self.inner:
            read += len(chunk)
            if read > self.limit:
                await self.aclose()
                raise httpx2.StreamError(f"{_BODY_MARK}{self.limit} bytes")  # the SDK answers the request with it
            yield chunk

    async def aclose(self) -> None:
        close = getattr(self.inner, "aclose", None)
        if close is not None:
            await close()
