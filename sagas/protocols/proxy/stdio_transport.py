"""A stdio downstream with bounded reads: the server runs as a child process in its own process group and exchanges
newline-delimited JSON-RPC with the proxy, as the SDK's `stdio_client` does, except that a line is never buffered
past the result limit (sagas.protocols.proxy.result_cap.LineCap). An oversized answer is replaced by a synthesized
error for the request it answers; an oversized message that names no request is dropped with a warning.

Shutdown follows the MCP lifecycle for stdio: close the server's stdin, give it a moment to exit, then end its
whole process group (the SDK's `terminate_posix_process_tree`), every wait bounded and shielded, so a cancelled
proxy never leaks a server process.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
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
from mcp.shared.message import SessionMessage

from sagas.protocols.proxy.raw_channel import RawAnswer, RawChannel
from sagas.protocols.proxy.result_cap import LineCap, Oversized, synthesized_answer

logger = logging.getLogger("sagas.protocols.proxy")

# Seconds a server has to exit by itself once its stdin is closed, then to die once signalled.
EXIT_GRACE_SECONDS = 2.0
KILL_GRACE_SECONDS = 2.0
_CHUNK = 65536

# What the session's read stream carries: messages, parse errors, and answers to the fast path's calls (which the
# stream's reader, sagas.protocols.proxy.floods.GatedStream, delivers to them instead of the session).
Incoming = SessionMessage | Exception | RawAnswer
Streams = tuple[MemoryObjectReceiveStream[Incoming], MemoryObjectSendStream[SessionMessage]]


@contextlib.asynccontextmanager
async def bounded_stdio_client(
    command: str,
    args: list[str],
    *,
    env: dict[str, str] | None,
    cwd: Path | None,
    max_message_bytes: int,
    errlog: TextIO = sys.stderr,
    raw: RawChannel | None = None,
) -> AsyncIterator[Streams]:
    """Start the server and yield the session's (read, write) streams; the server is stopped when the block ends.
    Like the SDK's stdio client, the child inherits only the safe default environment plus `env`. With `raw`, the
    fast path's calls share the pipe (sagas.protocols.proxy.raw_channel): the answers to them are its, not the
    session's."""
    process = await anyio.open_process(
        [command, *args], env=get_default_environment() | (env or {}), stderr=errlog, cwd=cwd, start_new_session=True
    )
    incoming_send, incoming = anyio.create_memory_object_stream[Incoming](0)
    outgoing, outgoing_receive = anyio.create_memory_object_stream[SessionMessage](0)
    assert process.stdin is not None
    if raw is not None:
        raw.attach(_plain_writer(process))
    async with anyio.create_task_group() as group:
        group.start_soon(_read, process, incoming_send, max_message_bytes, raw)
        group.start_soon(_write, process, outgoing_receive, incoming_send)
        try:
            yield incoming, outgoing
        finally:
            with anyio.CancelScope(shield=True):
                if raw is not None:
                    raw.detach("the proxy is closing its connection to the server")
                outgoing.close()
                incoming.close()
                await _stop(process)
            group.cancel_scope.cancel()


async def _read(
    process: Process,
    incoming: MemoryObjectSendStream[Incoming],
    max_message_bytes: int,
    raw: RawChannel | None,
) -> None:
    assert process.stdout is not None
    lines = LineCap(max_message_bytes)
    async with incoming:
        try:
            while True:
                chunk = await process.stdout.receive(_CHUNK)
                for line in lines.feed(chunk):
                    answer = _raw_answer(raw, line, max_message_bytes) if raw is not None else None
                    if (message := answer or _message(line, max_message_bytes)) is not None:
                        await incoming.send(message)
        except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            return  # the server exited or closed its stdout, or the session is gone: the session sees the end
        finally:
            if raw is not None:
                raw.detach("the server's output ended (it exited or closed its stdout) before it answered")


def _plain_writer(process: Process) -> Any:
    """How the fast path writes a line to the server: straight into the pipe's asyncio writer (the one the session's
    writes go through too, so lines never interleave), waiting only when the pipe's buffer is full; anyio's `send`
    yields to the event loop twice per line, which costs more than the write."""
    assert process.stdin is not None
    writer = getattr(process.stdin, "_stream", None)
    if not isinstance(writer, asyncio.StreamWriter):
        return process.stdin.send

    async def send(data: bytes) -> None:
        if writer.is_closing():
            raise anyio.BrokenResourceError("the server's stdin is closed")
        writer.write(data)
        if writer.transport.get_write_buffer_size() > _CHUNK:
            await writer.drain()

    return send


def _raw_answer(raw: RawChannel, line: bytes | Oversized, limit: int) -> RawAnswer | None:
    """The answer to one of the fast path's calls that `line` is, if it is one."""
    if isinstance(line, Oversized):
        return raw.answer_of(synthesized_answer(line, limit)) if line.request_id is not None else None
    return raw.answer_of(line)


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
    incoming: MemoryObjectSendStream[Incoming],
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
