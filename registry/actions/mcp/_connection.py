"""One short connection to a downstream MCP server, and how far an invocation on it got.

`connection` resolves a contract's server block (secret references included) into a `Connection`; `open_client`
opens it as an SDK client over Streamable HTTP or a stdio subprocess; `run_blocking` runs the async invocation from
the coordinator's worker threads, which have no event loop; `stderr_log` keeps a stdio server's stderr private.
`Progress` records the phase an invocation reached, which decides whether a failure is certain (nothing sent).
A connection shared by many calls (registry.actions.mcp._pool) is opened with a `Liveness`, which notes when the
server closed it.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import functools
import shlex
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from importlib import metadata
from types import TracebackType
from typing import Any, TextIO, TypeVar, cast

import anyio
import httpx2
from mcp import Client
from mcp.client import Transport
from mcp.client._transport import ReadStream, TransportStreams
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.message import SessionMessage
from mcp.types import CallToolResult, Implementation, Tool

from registry.secrets import resolve_header

# A whole invocation (connect, capture, call) within 30 s: long enough for a slow downstream tool, short enough
# that a hung server releases the worker well before a typical lease runs out.
DEFAULT_TIMEOUT_SECONDS = 30.0
USER_AGENT = "semantic-saga"

T = TypeVar("T")


@functools.cache
def _client_info() -> Implementation:
    try:
        version = metadata.version("semantic-saga")
    except metadata.PackageNotFoundError:
        version = "0"
    return Implementation(name="semantic-saga", version=version)


@dataclass(frozen=True)
class Connection:
    """A server block of a contract with its secret references resolved (never stored or shown)."""

    transport: str
    url: str = ""
    headers: dict[str, str] = field(default_factory=dict)
    command: str = ""
    args: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    cwd: str | None = None
    secrets: tuple[str, ...] = ()

    @property
    def where(self) -> str:
        """How messages name the server: the URL, or the command line (never header or env values)."""
        if self.transport == "stdio":
            return f"the stdio server `{shlex.join([self.command, *self.args])}`"
        return self.url


def connection(server: dict[str, Any]) -> Connection:
    """Resolve the contract's server block; ActionFailure (nothing sent) when a secret is unavailable."""
    secrets: list[str] = []

    def resolve(values: dict[str, Any]) -> dict[str, str]:
        resolved = {}
        for name, value in values.items():
            resolved[name] = resolve_header(value)
            if not isinstance(value, str):
                secrets.append(resolved[name].removeprefix(value.get("prefix", "")))
        return resolved

    if server.get("transport") == "stdio":
        env = resolve(server.get("env") or {})
        return Connection(
            transport="stdio",
            command=str(server["command"]),
            args=tuple(str(arg) for arg in server.get("args") or ()),
            env=env,
            cwd=server.get("cwd"),
            secrets=tuple(secrets),
        )
    headers = resolve(server.get("headers") or {})
    return Connection(transport="streamable_http", url=str(server["url"]), headers=headers, secrets=tuple(secrets))


@dataclass
class Liveness:
    """Whether the server of a shared connection still talks: `closed` once its messages ended (a stdio server
    exited). The pool then opens a new connection before sending, instead of sending a call into a closed one, which
    the SDK would fail as a lost answer (uncertain) though nothing was sent."""

    closed: bool = False


class _WatchedRead:
    """A transport's read stream that sets `liveness.closed` when it ends; everything else is the stream's own."""

    def __init__(self, stream: ReadStream[SessionMessage | Exception], liveness: Liveness) -> None:
        self._stream = stream
        self._liveness = liveness

    @property
    def last_context(self) -> Any:
        # The SDK's dispatcher reads this duck-typed (the sender's contextvars, on HTTP); keep passing it through.
        return getattr(self._stream, "last_context", None)

    async def receive(self) -> SessionMessage | Exception:
        try:
            return await self._stream.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
            self._liveness.closed = True
            raise

    async def aclose(self) -> None:
        await self._stream.aclose()

    def __aiter__(self) -> _WatchedRead:
        return self

    async def __anext__(self) -> SessionMessage | Exception:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def __aenter__(self) -> _WatchedRead:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()


@contextlib.asynccontextmanager
async def _watched(transport: Transport, liveness: Liveness) -> AsyncIterator[TransportStreams]:
    async with transport as (read_stream, write_stream):
        yield _WatchedRead(read_stream, liveness), write_stream


@contextlib.asynccontextmanager
async def open_client(
    conn: Connection, timeout: float, errlog: TextIO, *, liveness: Liveness | None = None
) -> AsyncIterator[Client]:
    """An SDK client for `conn`. With `liveness`, a connection shared by many calls: its read stream reports when
    the server closed it, and its HTTP client sets no timeout of its own, because it serves calls with different
    timeouts and each call is bounded by its own `fail_after` (the pool bounds the close)."""
    options: dict[str, Any] = {"read_timeout_seconds": timeout, "client_info": _client_info(), "cache": None}

    def watched(transport: Transport) -> Transport:
        return transport if liveness is None else _watched(transport, liveness)

    if conn.transport == "stdio":
        params = StdioServerParameters(command=conn.command, args=list(conn.args), env=conn.env or None, cwd=conn.cwd)
        async with Client(watched(stdio_client(params, errlog=errlog)), **options) as client:
            yield client
        return
    limit = httpx2.Timeout(timeout if liveness is None else None)
    http = httpx2.AsyncClient(headers={"User-Agent": USER_AGENT, **conn.headers}, timeout=limit)
    async with http, Client(watched(streamable_http_client(conn.url, http_client=http)), **options) as client:
        yield client


def run_blocking(fn: Callable[[], Awaitable[T]]) -> T:
    """Run an async function to completion from sync code, in its own event loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return anyio.run(fn)
    # A loop already runs in this thread (an async caller used the sync API): run beside it, not inside it.
    with concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="mcp-action") as pool:
        return pool.submit(anyio.run, fn).result()


@contextlib.contextmanager
def stderr_log() -> Iterator[TextIO]:
    # A stdio server's stderr goes to a private temporary file: quoted (redacted) when the server fails, kept out
    # of the worker's own log otherwise.
    with tempfile.TemporaryFile(mode="w+", encoding="utf-8", errors="replace") as handle:
        yield cast(TextIO, handle)


@dataclass
class Progress:
    """How far an invocation got; decides whether a failure is certain (nothing sent) or not."""

    phase: str = "connect"  # connect -> capture -> call (-> done); list for tools/list
    captured: CallToolResult | None = None
    captured_bytes: int = 0
    answer: CallToolResult | None = None
    tools: list[Tool] = field(default_factory=list)
    server: Implementation | None = None
    protocol_version: str = ""
