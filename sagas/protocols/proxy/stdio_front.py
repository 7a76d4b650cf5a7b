"""The stdio proxy's own side of the wire: the agent's JSON-RPC lines in, the answers out, with the fast path
(sagas.protocols.proxy.fast_calls) offered each plain tools/call before the SDK's server sees it.

It does what the SDK's `stdio_server` does (fd 0 and fd 1 kept private while serving, so a stray print or a child
cannot write on the wire; both restored on exit) without its two worker-thread hops per message: stdin and stdout
are asyncio pipes when they are pipes, sockets or terminals (a regular file falls back to a thread for reads and
plain writes). Every line is offered to `FastFront.take` first; what it does not take (every other method, a
batch, anything malformed) reaches the SDK's server exactly as the SDK's transport would pass it: parsed and
validated, or the parse error. Both paths write through one writer, so their lines never interleave.

The front also keeps the ids of requests in flight on either path, so the fast path never takes a request whose
id is still being answered (a reused id goes to the SDK, as before), and a notifications/cancelled for a fast call
cancels it.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import json
import os
from collections.abc import AsyncIterator, Callable
from typing import Any, Protocol

import anyio
import mcp_types as types
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.shared.message import SessionMessage

# A line longer than this from the agent is read as a parse error rather than buffered without end.
MAX_LINE_BYTES = 64 * 1024 * 1024
_CANCELLED = b'"notifications/cancelled"'

SdkStreams = tuple[MemoryObjectReceiveStream[SessionMessage | Exception], MemoryObjectSendStream[SessionMessage]]


class FastFront(Protocol):
    def take(self, line: bytes, busy: Callable[[Any], bool], front: StdioFront) -> bool:
        """Whether the fast path answers `line` itself (it then writes the answer through `front`). `busy(id)` says
        whether a request with that id is still in flight."""
        ...

    def cancel(self, request_id: Any) -> bool:
        """Cancel the fast call with this id, if one is in flight."""
        ...


class StdioFront:
    def __init__(self, writer: _Writer, sdk: MemoryObjectSendStream[SessionMessage | Exception]) -> None:
        self._writer = writer
        self._sdk = sdk
        self.sdk_in_flight: set[Any] = set()  # ids of requests the SDK's server is answering

    async def write(self, data: bytes) -> None:
        """One line (or several) to the agent, whole."""
        await self._writer.write(data)

    def busy(self, request_id: Any) -> bool:
        return request_key(request_id) in self.sdk_in_flight

    async def to_sdk(self, line: bytes) -> None:
        """`line` to the SDK's server, parsed and validated as the SDK's own transport would (or its parse error);
        dropped once the agent's input has ended (the server is stopping)."""
        try:
            message = types.jsonrpc_message_adapter.validate_json(line, by_name=False)
        except Exception as error:  # the SDK's server answers a parse error as its own transport would have it
            with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
                await self._sdk.send(error)
            return
        if isinstance(message, types.JSONRPCRequest):
            self.sdk_in_flight.add(request_key(message.id))
        with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
            await self._sdk.send(SessionMessage(message))


def request_key(request_id: Any) -> Any:
    # 1 and "1" are different ids in JSON-RPC, and True is not 1.
    return (type(request_id).__name__, request_id)


@contextlib.asynccontextmanager
async def stdio_front(fast: FastFront | None) -> AsyncIterator[tuple[SdkStreams, StdioFront]]:
    """Serve the process's stdin and stdout for the block: the SDK server's (read, write) streams, and the front
    the fast path writes through."""
    with _private_fd(0, os.O_RDONLY) as wire_in, _private_fd(1, os.O_WRONLY) as wire_out:
        reader, writer = await _open(wire_in, wire_out)
        to_sdk, sdk_in = anyio.create_memory_object_stream[SessionMessage | Exception](0)
        sdk_out, from_sdk = anyio.create_memory_object_stream[SessionMessage](0)
        front = StdioFront(writer, to_sdk)
        async with anyio.create_task_group() as group:
            group.start_soon(_read_lines, reader, to_sdk, fast, front)
            group.start_soon(_write_sdk, from_sdk, front)
            try:
                yield (sdk_in, sdk_out), front
            finally:
                group.cancel_scope.cancel()
        reader.close()
        writer.close()


async def _read_lines(
    reader: _Reader,
    to_sdk: MemoryObjectSendStream[SessionMessage | Exception],
    fast: FastFront | None,
    front: StdioFront,
) -> None:
    async with to_sdk:
        while line := await reader.readline():
            if fast is not None and fast.take(line, front.busy, front):
                continue
            if fast is not None and _CANCELLED in line and _cancels_fast(line, fast):
                continue
            await front.to_sdk(line)


def _cancels_fast(line: bytes, fast: FastFront) -> bool:
    try:
        message = json.loads(line)
        if message["method"] != "notifications/cancelled":
            return False  # the words in some other message (an argument's value, say)
        return bool(fast.cancel(message["params"]["requestId"]))
    except (ValueError, TypeError, KeyError, RecursionError):
        return False


async def _write_sdk(from_sdk: MemoryObjectReceiveStream[SessionMessage], front: StdioFront) -> None:
    async with from_sdk:
        async for session_message in from_sdk:
            message = session_message.message
            if isinstance(message, types.JSONRPCResponse | types.JSONRPCError):
                front.sdk_in_flight.discard(request_key(message.id))
            data = message.model_dump_json(by_alias=True, exclude_unset=True) + "\n"
            await front.write(data.encode("utf-8"))


# --- the pipes -------------------------------------------------------------------------------------------------


@contextlib.contextmanager
def _private_fd(fd: int, flags: int) -> Any:
    """A private duplicate of `fd` for the wire, with `fd` itself pointed at the null device (stdin) or stderr
    (stdout) meanwhile; restored, with its blocking mode, on exit."""
    private = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 3)
    mode = fcntl.fcntl(private, fcntl.F_GETFL)
    diversion = os.open(os.devnull, os.O_RDONLY) if flags == os.O_RDONLY else os.dup(2)
    os.dup2(diversion, fd)
    os.close(diversion)
    try:
        yield private
    finally:
        with contextlib.suppress(OSError):
            fcntl.fcntl(private, fcntl.F_SETFL, mode)  # an asyncio pipe made it non-blocking, for everyone sharing it
            os.dup2(private, fd)
        with contextlib.suppress(OSError):
            os.close(private)


class _Reader(Protocol):
    async def readline(self) -> bytes: ...

    def close(self) -> None: ...


class _Writer(Protocol):
    async def write(self, data: bytes) -> None: ...

    def close(self) -> None: ...


async def _open(wire_in: int, wire_out: int) -> tuple[_Reader, _Writer]:
    loop = asyncio.get_running_loop()
    reader: _Reader
    try:
        stream = asyncio.StreamReader(limit=MAX_LINE_BYTES)
        read_transport, _ = await loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(stream), os.fdopen(wire_in, "rb", buffering=0, closefd=False)
        )
        reader = _StreamLines(stream, read_transport)
    except ValueError:  # a regular file: read it on a thread
        reader = _ThreadLines(wire_in)
    writer: _Writer
    try:
        transport, protocol = await loop.connect_write_pipe(
            _Drained, os.fdopen(wire_out, "wb", buffering=0, closefd=False)
        )
        writer = _PipeWriter(transport, protocol)
    except ValueError:  # a regular file: plain writes never block for long
        writer = _FileWriter(wire_out)
    return reader, writer


class _StreamLines:
    def __init__(self, stream: asyncio.StreamReader, transport: asyncio.BaseTransport) -> None:
        self._stream = stream
        self._transport = transport

    def close(self) -> None:
        self._transport.close()  # before the descriptor is restored and closed: the loop stops watching it

    async def readline(self) -> bytes:
        # readuntil, not readline: past its limit, readline clears the whole buffer, lines after the long one too.
        try:
            return await self._stream.readuntil(b"\n")
        except asyncio.IncompleteReadError as end:  # the input ended: its last line without a newline, else b""
            return end.partial
        except asyncio.LimitOverrunError as overrun:  # past MAX_LINE_BYTES: dropped to the line's end
            await self._stream.readexactly(overrun.consumed)
            await self._discard_line()
            return b"{oversized line}\n"  # the SDK's server answers it as a parse error

    async def _discard_line(self) -> None:
        while True:
            try:
                await self._stream.readuntil(b"\n")
                return
            except asyncio.LimitOverrunError as overrun:  # still no end of line within the limit: drop that much
                await self._stream.readexactly(overrun.consumed)
            except asyncio.IncompleteReadError:  # the input ended inside the line
                return


class _ThreadLines:
    def __init__(self, fd: int) -> None:
        self._file = os.fdopen(fd, "rb", closefd=False)

    async def readline(self) -> bytes:
        line: bytes = await anyio.to_thread.run_sync(self._file.readline, abandon_on_cancel=True)
        return line

    def close(self) -> None:
        return None


class _Drained(asyncio.Protocol):
    """Write-side flow control: `drained()` waits while the pipe's buffer is over its high-water mark."""

    def __init__(self) -> None:
        self._ready = asyncio.Event()
        self._ready.set()

    @property
    def paused(self) -> bool:
        return not self._ready.is_set()

    def pause_writing(self) -> None:
        self._ready.clear()

    def resume_writing(self) -> None:
        self._ready.set()

    def connection_lost(self, exc: Exception | None) -> None:
        self._ready.set()

    async def drained(self) -> None:
        await self._ready.wait()


class _PipeWriter:
    def __init__(self, transport: asyncio.WriteTransport, protocol: _Drained) -> None:
        self._transport = transport
        self._protocol = protocol

    async def write(self, data: bytes) -> None:
        if self._transport.is_closing():
            raise anyio.BrokenResourceError("the agent closed its end of stdout")
        self._transport.write(data)  # whole, into the transport's buffer: lines never interleave
        if self._protocol.paused:
            await self._protocol.drained()

    def close(self) -> None:
        self._transport.close()


class _FileWriter:
    def __init__(self, fd: int) -> None:
        self._fd = fd

    async def write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            view = view[os.write(self._fd, view) :]

    def close(self) -> None:
        return None
