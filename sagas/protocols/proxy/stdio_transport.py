"""A stdio downstream with bounded reads: the server runs as a child process in its own process group and exchanges
newline-delimited JSON-RPC with the proxy, as the SDK's `stdio_client` does, except that a line is never buffered
past the result limit (sagas.protocols.proxy.result_cap.LineCap). An oversized answer is replaced by a synthesized
error for the request it answers; an oversized message that names no request is dropped with a warning.

Shutdown follows the MCP lifecycle for stdio: close the server's stdin, give it a moment to exit, then end its
whole process group (the SDK's `terminate_posix_process_tree`), every wait bounded and shielded, so a cancelled
proxy never leaks a server process.

`proxy_stdio_server` is the other side: the proxy's own stdio server for its client, without the SDK's thread hops.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import stat
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, TextIO

import anyio
import mcp_types as types
from anyio.abc import Process
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.client.stdio import get_default_environment
from mcp.os.posix.utilities import terminate_posix_process_tree
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage

from sagas.protocols.proxy.result_cap import LineCap, Oversized, synthesized_answer

logger = logging.getLogger("sagas.protocols.proxy")

# Seconds a server has to exit by itself once its stdin is closed, then to die once signalled.
EXIT_GRACE_SECONDS = 2.0
KILL_GRACE_SECONDS = 2.0
_CHUNK = 65536

Streams = tuple[MemoryObjectReceiveStream[SessionMessage | Exception], MemoryObjectSendStream[SessionMessage]]


@contextlib.asynccontextmanager
async def bounded_stdio_client(
    command: str,
    args: list[str],
    *,
    env: dict[str, str] | None,
    cwd: Path | None,
    max_message_bytes: int,
    errlog: TextIO = sys.stderr,
) -> AsyncIterator[Streams]:
    """Start the server and yield the session's (read, write) streams; the server is stopped when the block ends.
    Like the SDK's stdio client, the child inherits only the safe default environment plus `env`."""
    process = await anyio.open_process(
        [command, *args], env=get_default_environment() | (env or {}), stderr=errlog, cwd=cwd, start_new_session=True
    )
    incoming_send, incoming = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    outgoing, outgoing_receive = anyio.create_memory_object_stream[SessionMessage](0)
    async with anyio.create_task_group() as group:
        group.start_soon(_read, process, incoming_send, max_message_bytes)
        group.start_soon(_write, process, outgoing_receive, incoming_send)
        try:
            yield incoming, outgoing
        finally:
            with anyio.CancelScope(shield=True):
                outgoing.close()
                incoming.close()
                await _stop(process)
            group.cancel_scope.cancel()


async def _read(
    process: Process, incoming: MemoryObjectSendStream[SessionMessage | Exception], max_message_bytes: int
) -> None:
    assert process.stdout is not None
    lines = LineCap(max_message_bytes)
    async with incoming:
        try:
            while True:
                chunk = await process.stdout.receive(_CHUNK)
                for line in lines.feed(chunk):
                    if (message := _message(line, max_message_bytes)) is not None:
                        await incoming.send(message)
        except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            return  # the server exited or closed its stdout, or the session is gone: the session sees the end


def _message(line: bytes | Oversized, limit: int) -> SessionMessage | Exception | None:
    if isinstance(line, Oversized):
        if line.request_id is None:
            logger.warning("a downstream message of %d bytes named no request and was dropped", line.size_bytes)
            return None
        answer = synthesized_answer(line, limit)
        return SessionMessage(types.jsonrpc_message_adapter.validate_python(answer, by_name=False))
    if not line.strip():
        return None
    try:
        return SessionMessage(types.jsonrpc_message_adapter.validate_json(line, by_name=False))
    except ValueError as error:  # surfaced to the session, as the SDK's own transport does
        return error


async def _write(
    process: Process,
    outgoing: MemoryObjectReceiveStream[SessionMessage],
    incoming: MemoryObjectSendStream[SessionMessage | Exception],
) -> None:
    assert process.stdin is not None
    try:
        async with outgoing:
            async for message in outgoing:
                data = message.message.model_dump_json(by_alias=True, exclude_unset=True) + "\n"
                await process.stdin.send(data.encode("utf-8"))
    except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
        # The server stopped reading: end the session's view of it rather than leave a request hanging.
        await incoming.aclose()


async def _stop(process: Process) -> None:
    assert process.stdin is not None and process.stdout is not None
    with contextlib.suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
        await process.stdin.aclose()
    if not await _exited(process, EXIT_GRACE_SECONDS):
        await terminate_posix_process_tree(process, KILL_GRACE_SECONDS)
        if not await _exited(process, KILL_GRACE_SECONDS):
            logger.warning("downstream process %d is still alive after SIGKILL; leaving it", process.pid)
    with contextlib.suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
        await process.stdout.aclose()


async def _exited(process: Process, seconds: float) -> bool:
    # Not process.wait(): it also waits for the pipes to close, which a child that inherited them holds open.
    with anyio.move_on_after(seconds):
        while process.returncode is None:
            await anyio.sleep(0.02)
        return True
    return False


# The longest line the proxy's own stdio server reads from its client (a request's arguments); the SDK's has none.
CLIENT_LINE_LIMIT = 256 * 1024 * 1024


@contextlib.asynccontextmanager
async def proxy_stdio_server() -> AsyncIterator[tuple[Any, Any]]:
    """The SDK's `stdio_server`, reading and writing the client's pipes on the event loop. The SDK's own reads
    stdin and writes stdout through worker threads (anyio.wrap_file): three thread hops per request, each waiting
    for the interpreter and the scheduler. When stdin and stdout are pipes or sockets (how an MCP client starts a
    stdio server), they are moved to private descriptors read and written by asyncio, and fd 0 and 1 point at the
    null device and stderr meanwhile (as the SDK does, so stray output misses the wire), restored on exit; a
    terminal or a file falls back to the SDK's transport."""
    if not (_is_pipe(0) and _is_pipe(1)):
        async with stdio_server() as streams:
            yield streams
        return
    saved_in, saved_out = os.dup(0), os.dup(1)
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=CLIENT_LINE_LIMIT)
    read_transport, _ = await loop.connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(os.dup(saved_in), "rb", buffering=0)
    )
    write_transport, protocol = await loop.connect_write_pipe(
        asyncio.streams.FlowControlMixin, os.fdopen(os.dup(saved_out), "wb", buffering=0)
    )
    writer = asyncio.StreamWriter(write_transport, protocol, None, loop)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(2, 1)
    os.close(null)
    try:
        async with stdio_server(stdin=_Lines(reader), stdout=_Writer(writer)) as streams:  # type: ignore[arg-type]
            yield streams
    finally:
        read_transport.close()
        write_transport.close()
        os.dup2(saved_in, 0)
        os.dup2(saved_out, 1)
        os.close(saved_in)
        os.close(saved_out)
        for fd in (0, 1):
            with contextlib.suppress(OSError):
                os.set_blocking(fd, True)  # asyncio set the shared descriptions non-blocking


def _is_pipe(fd: int) -> bool:
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


class _Lines:
    """What the SDK's stdio_server reads: an async iterator of text lines (undecodable bytes replaced, as the SDK's)."""

    def __init__(self, reader: asyncio.StreamReader) -> None:
        self.reader = reader

    def __aiter__(self) -> _Lines:
        return self

    async def __anext__(self) -> str:
        line = await self.reader.readline()
        if not line:
            raise StopAsyncIteration
        return line.decode("utf-8", errors="replace")


class _Writer:
    """What the SDK's stdio_server writes to: write a line, then flush (wait until the pipe takes it)."""

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self.writer = writer

    async def write(self, text: str) -> None:
        self.writer.write(text.encode("utf-8"))

    async def flush(self) -> None:
        await self.writer.drain()
