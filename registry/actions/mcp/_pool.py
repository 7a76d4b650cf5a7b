"""Where an invocation's tool calls run: on a connection of their own, or, inside `shared_connections()`, on one
connection per downstream server shared by every call of the scope.

Outside a scope every invocation opens a fresh connection and closes it after its calls (a stdio server is started
and stopped each time). That keeps retries, recovery and threads independent, but costs a server start per call: an
undo of 100 calls against a stdio server spent over a second per inverse starting Python. Inside a scope (the undo
walk, sagas.coordinator._undo_walk) the first call to a server opens an SDK client session, later calls to the same
server reuse it, and the scope's end closes every session and stops every stdio server.

The per-call semantics are a fresh connection's: each call is bounded by its own timeout (connecting included when
it opens the session), its `Progress` phase decides certain vs uncertain, and a failure quotes the server's stderr
(one private log per session). A call that fails in any way drops its session, closing it before the failure is
built, so the next call to that server opens a new one; a session whose server closed it between calls (a stdio
server that exited) is replaced before anything is sent. Nothing here ever sends a tool call a second time.

Sessions live on an event loop in a thread of the scope's own (anyio's blocking portal), each held open by a task
there, since an SDK client must be entered and left by the same task. A scope belongs to the thread that opened it
(a nested scope in that thread reuses it); calls from other threads get a fresh connection each, as outside a scope.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import json
import logging
import threading
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import TextIO

import anyio
from anyio.abc import TaskGroup, TaskStatus
from anyio.from_thread import BlockingPortal, start_blocking_portal
from mcp import Client
from opentelemetry import context as otel_context

from registry.actions.mcp._connection import Connection, Liveness, open_client, run_blocking, stderr_log

logger = logging.getLogger("registry.actions.mcp")

# How long a session gets to close (a stdio server exits once its stdin closes; an HTTP session is ended with a
# DELETE) before what is left of its closing is cancelled: a well-behaved server needs milliseconds; a stuck one
# must not hold up the end of an undo. A stdio server's own shutdown is bounded by the SDK too (it kills the
# server's process tree 2 s after closing its stdin).
CLOSE_TIMEOUT_SECONDS = 5.0

Steps = Callable[[Client], Awaitable[None]]


@dataclass(eq=False)
class _Session:
    """One shared connection: its stderr log, and, once its holder task opened it, the client and how to end it."""

    where: str
    errlog: TextIO
    release: contextlib.ExitStack  # closes the stderr log once no failure message can quote it any more
    liveness: Liveness = field(default_factory=Liveness)
    client: Client | None = None
    broken: bool = False  # a call on it failed: it was closed and is not used again
    closing: anyio.Event | None = None  # set: the holder closes the client
    done: anyio.Event | None = None  # set: the holder has left the client (closed, or failed to open)
    holder: anyio.CancelScope | None = None

    def gone(self) -> bool:
        return self.broken or self.liveness.closed or (self.done is not None and self.done.is_set())


class _Pool:
    """The sessions of one scope, keyed by connection; the portal and its task group start on the first call."""

    def __init__(self) -> None:
        self._sessions: dict[str, _Session] = {}
        self._stack = contextlib.ExitStack()
        self._portal: BlockingPortal | None = None
        self._group: TaskGroup | None = None
        self._stopping: anyio.Event | None = None

    def portal(self) -> BlockingPortal:
        if self._portal is None:
            portal = self._stack.enter_context(start_blocking_portal(name="mcp-shared-connections"))
            _, self._group = portal.start_task(self._serve)
            self._stack.callback(portal.call, self._stop)  # runs before the portal stops (LIFO)
            self._portal = portal
        return self._portal

    def session_for(self, conn: Connection) -> tuple[str, _Session]:
        key = _key(conn)
        session = self._sessions.get(key)
        if session is not None and session.gone():
            self.retire(key, session)
            session = None
        if session is None:
            release = contextlib.ExitStack()
            errlog = release.enter_context(stderr_log())
            session = self._sessions[key] = _Session(conn.where, errlog, release)
        return key, session

    def retire(self, key: str, session: _Session) -> None:
        """Forget a session that failed or whose server left, once its failure (if any) has been built."""
        if self._sessions.get(key) is session:
            del self._sessions[key]
        if self._portal is not None:
            self._portal.call(self._end, session)  # at once when it is already closed
        session.release.close()

    def close(self) -> None:
        try:
            if self._portal is not None:
                self._portal.call(self._end_all)
        finally:
            for session in self._sessions.values():
                session.release.close()
            self._sessions.clear()
            self._stack.close()

    # --- on the portal's event loop -------------------------------------------------------------------------------

    async def _serve(self, *, task_status: TaskStatus[TaskGroup]) -> None:
        # The group the holder tasks run in: it outlives every call, so a session outlives the call that opened it.
        self._stopping = anyio.Event()
        async with anyio.create_task_group() as group:
            task_status.started(group)
            await self._stopping.wait()
            group.cancel_scope.cancel()

    def _stop(self) -> None:
        assert self._stopping is not None
        self._stopping.set()

    async def invoke(
        self, session: _Session, conn: Connection, timeout: float, steps: Steps, trace: otel_context.Context
    ) -> None:
        # The caller's trace context, so the SDK's client spans join its trace as they do on a fresh connection.
        token = otel_context.attach(trace)
        try:
            with anyio.fail_after(timeout):  # the call's own bound, connecting included when it opens the session
                if session.client is None:
                    assert self._group is not None
                    session.closing, session.done = anyio.Event(), anyio.Event()
                    session.client = await self._group.start(self._hold, session, conn, timeout)
                await steps(session.client)
        except BaseException:
            # The session may hold a half-answered request: close it (so a stdio server's stderr is complete before
            # the failure quotes it) and never use it again. The call is not repeated: the caller reports it.
            session.broken = True
            with anyio.CancelScope(shield=True):
                await self._end(session)
            raise
        finally:
            otel_context.detach(token)

    async def _hold(
        self, session: _Session, conn: Connection, timeout: float, *, task_status: TaskStatus[Client]
    ) -> None:
        assert session.closing is not None and session.done is not None
        opened = False
        try:
            with anyio.CancelScope() as session.holder:
                async with open_client(conn, timeout, session.errlog, liveness=session.liveness) as client:
                    logger.debug("opened a shared MCP connection to %s", session.where)
                    opened = True
                    task_status.started(client)
                    await session.closing.wait()
        except Exception as exc:
            if not opened:
                raise  # to the call that opened it, which reports it as a connect failure
            # Raised while closing a session that is done with: nothing downstream changes; keep the group running.
            logger.warning("closing the shared MCP connection to %s failed: %r", session.where, exc)
        finally:
            session.done.set()

    async def _end(self, session: _Session) -> None:
        """Close one session, bounded: after CLOSE_TIMEOUT_SECONDS what is left of its closing is cancelled."""
        if session.client is None or session.closing is None or session.done is None:
            return  # never opened: a holder that failed to open has already exited (the opening call waited for it)
        session.closing.set()
        with anyio.move_on_after(CLOSE_TIMEOUT_SECONDS):
            await session.done.wait()
        if not session.done.is_set() and session.holder is not None:
            logger.warning("the shared MCP connection to %s did not close in time; cancelling it", session.where)
            session.holder.cancel()
            with anyio.move_on_after(CLOSE_TIMEOUT_SECONDS):
                await session.done.wait()

    async def _end_all(self) -> None:
        async with anyio.create_task_group() as group:
            for session in self._sessions.values():
                group.start_soon(self._end, session)


def _key(conn: Connection) -> str:
    # Everything that decides where and how the client connects, resolved secrets included (a rotated secret is a
    # new connection), hashed so that a key never shows them.
    fields = json.dumps(dataclasses.asdict(conn), sort_keys=True)
    return hashlib.sha256(fields.encode()).hexdigest()


class _Fresh:
    """A connection of the invocation's own, opened and closed around its steps in the calling thread."""

    def __init__(self, conn: Connection, timeout: float, errlog: TextIO) -> None:
        self._conn, self._timeout, self.errlog = conn, timeout, errlog

    def run(self, steps: Steps) -> None:
        run_blocking(functools.partial(_fresh, self._conn, self._timeout, self.errlog, steps))


async def _fresh(conn: Connection, timeout: float, errlog: TextIO, steps: Steps) -> None:
    with anyio.fail_after(timeout):
        async with open_client(conn, timeout, errlog) as client:
            await steps(client)


class _Shared:
    """The scope's session for the invocation's server; `errlog` is that session's stderr log."""

    def __init__(self, pool: _Pool, conn: Connection, timeout: float) -> None:
        self._pool, self._conn, self._timeout = pool, conn, timeout
        self.key, self.session = pool.session_for(conn)
        self.errlog = self.session.errlog

    def run(self, steps: Steps) -> None:
        portal = self._pool.portal()
        portal.call(self._pool.invoke, self.session, self._conn, self._timeout, steps, otel_context.get_current())


_local = threading.local()  # the scope of this thread (`pool`), if one is open


@contextlib.contextmanager
def channel(conn: Connection, timeout: float) -> Iterator[_Fresh | _Shared]:
    """Where one invocation runs its steps (`run`), with the stderr log a failure message quotes (`errlog`): the
    scope's session for `conn` inside `shared_connections()`, a connection of its own outside. Leave the block only
    after any failure has been built: a failed session's log is closed then."""
    pool: _Pool | None = getattr(_local, "pool", None)
    if pool is None:
        with stderr_log() as errlog:
            yield _Fresh(conn, timeout, errlog)
        return
    shared = _Shared(pool, conn, timeout)
    try:
        yield shared
    finally:
        if shared.session.broken:
            pool.retire(shared.key, shared.session)


@contextlib.contextmanager
def shared_connections() -> Iterator[None]:
    """Inside the block, this thread's `kind: mcp` calls share one connection per downstream server, opened on first
    use and closed (stdio servers stopped) when the block ends, also when it raises; the close is bounded
    (CLOSE_TIMEOUT_SECONDS per connection, all at once). Re-entrant: a nested block reuses the outer one's
    connections. Calls from other threads are not affected: each gets a fresh connection, as outside a block."""
    if getattr(_local, "pool", None) is not None:
        yield
        return
    pool = _Pool()
    _local.pool = pool
    try:
        yield
    finally:
        _local.pool = None
        pool.close()
