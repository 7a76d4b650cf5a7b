"""The task machinery: creating tasks, driving them to their end in whichever process is serving, and reading them.

A task is created durably (store.task_create) before its handle is returned, with this process's driver lease
taken, and a driver starts in the background: it runs the task's kind (`TaskKind.drive`) until the kind says how
the task ends, renewing the lease meanwhile, and then records the end. If this process stops, the lease lapses
and the next process asked about the task (tasks/get starts a driver in the background, tasks/result drives it
and waits) takes over: the kind reads what it needs from the row, so any process with the same kind can finish
it. Two processes never drive one task at once (the lease is taken with a conditional UPDATE).
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import anyio
from anyio.abc import TaskGroup
from mcp_types.jsonrpc import INTERNAL_ERROR

from governance.identity.principal import Principal
from sagas.models import McpTask
from sagas.protocols.mcp.tasks import store
from sagas.protocols.mcp.tasks.store import TERMINAL, NewTask, Owner
from sagas.protocols.orm import run_orm

logger = logging.getLogger("sagas.protocols.mcp.tasks")

# How long a driver's lease lasts without renewal: a stopped process's tasks are taken over this long after.
LEASE_SECONDS = 15.0
# How often a waiting tasks/result (or a kind waiting for a person) looks again; also the clients' poll hint.
POLL_SECONDS = 0.5
POLL_INTERVAL_MS = 1000
# How long a task is kept when the client names no ttl (2025-11-25 clients may ask for another).
DEFAULT_TTL_MS = 24 * 3600 * 1000
# tasks/list page size.
PAGE_SIZE = 50

# The kind of a task born completed (see TaskService.settled): nothing ever drives it.
SETTLED = "settled"

Note = Callable[[str, str], Awaitable[None]]  # (status, message): what a running task waits for now
# Told the task each time its status or message changes in this process (notifications/tasks/status).
Listener = Callable[[McpTask], Awaitable[None]]


@dataclass(frozen=True)
class Finish:
    """How a task ends: completed (with the request's result, an isError one included), failed (a JSON-RPC error)
    or cancelled (with the result tasks/result gives for it)."""

    status: str
    message: str
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None


class TaskKind(Protocol):
    """What finishes the tasks of one kind; its state is the task row's `request`, `saga_id` and `node_id`."""

    async def drive(self, task: McpTask, principal: Principal, note: Note) -> Finish:
        """Work toward the task's end (waiting as long as needed) and say how it ends."""
        ...

    async def cancel(self, task: McpTask, principal: Principal) -> Finish | str:
        """Cancel it: the Finish when cancelled, or why it cannot be (it is no longer stoppable)."""
        ...


class TaskNotFound(LookupError):
    def __init__(self, task_id: str) -> None:
        super().__init__(
            f"Failed to retrieve task: no task {task_id!r} for this caller (it never existed, expired, or belongs "
            "to someone else). Use the taskId the call answered with (in 2025-11-25, tasks/list shows your tasks)."
        )


class TaskNotCancellable(RuntimeError):
    """The task ended already, or its work can no longer be stopped (the message says which)."""


class TaskService:
    def __init__(self, kinds: Mapping[str, TaskKind]) -> None:
        self.kinds = dict(kinds)
        self.driver_id = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self._group: TaskGroup | None = None
        self._driving: set[str] = set()
        self._listeners: dict[str, Listener] = {}

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """Background drivers run inside this block; leaving it stops them and gives their leases back."""
        async with anyio.create_task_group() as group:
            self._group = group
            try:
                yield
            finally:
                self._group = None
                group.cancel_scope.cancel()

    # --- creating -----------------------------------------------------------------------------------------------

    async def create(self, principal: Principal, new: NewTask, listener: Listener | None = None) -> McpTask:
        """A task that is durable before this returns; this process drives it from now on, telling `listener`
        (while this process drives it) each change of its status or message."""
        owner = _owner(principal)
        row = await run_orm(store.task_create, owner, new, driver=self.driver_id, lease_seconds=LEASE_SECONDS)
        if listener is not None:
            self._listeners[row.id] = listener
        self._spawn(row.id, principal, claimed=True)
        return row

    async def settled(
        self, principal: Principal, protocol_version: str, ttl_ms: int | None, answer: dict[str, Any]
    ) -> McpTask:
        """The task of a request a client asked to run as a task but that was answered at once: born completed with
        that answer (so it is listed and its result fetched like any other)."""
        new = NewTask(
            kind=SETTLED,
            protocol_version=protocol_version,
            status="completed",
            status_message="answered at once",
            request={},
            ttl_ms=ttl_for(ttl_ms, at_least_ms=0),
            poll_interval_ms=POLL_INTERVAL_MS,
            result={key: value for key, value in answer.items() if key != "_meta" or value},
        )
        return await run_orm(store.task_create, _owner(principal), new, driver="", lease_seconds=0)

    # --- reading --------------------------------------------------------------------------------------------------

    async def get(self, principal: Principal, task_id: str) -> McpTask:
        """The caller's task; one nobody drives any more is taken over in the background."""
        row = await self._find(principal, task_id)
        if row.status not in TERMINAL and not self._lease_alive(row):
            self._spawn(row.id, principal, claimed=False)
        return row

    async def result(self, principal: Principal, task_id: str) -> McpTask:
        """The caller's task once it ended: driven here if nobody drives it, else waited for."""
        while True:
            row = await self._find(principal, task_id)
            if row.status in TERMINAL:
                return row
            if row.id not in self._driving and not self._lease_alive(row):
                await self._drive(row.id, principal, claimed=False)
                continue
            await anyio.sleep(POLL_SECONDS)

    async def page(self, principal: Principal, cursor: str | None) -> tuple[list[McpTask], str | None]:
        return await run_orm(store.task_page, _owner(principal), cursor, PAGE_SIZE)

    async def cancel(self, principal: Principal, task_id: str) -> McpTask:
        """Cancel the caller's task through its kind. TaskNotCancellable: it ended, or can no longer be stopped
        (its message, recorded on the task too, says why)."""
        row = await self._find(principal, task_id)
        if row.status in TERMINAL:
            raise TaskNotCancellable(f"Cannot cancel task {row.id}: it already ended ({row.status}).")
        outcome = await self._kind(row).cancel(row, principal)
        if isinstance(outcome, str):
            await run_orm(store.task_note, row.id, row.status, outcome)
            raise TaskNotCancellable(outcome)
        await run_orm(store.task_finish, row.id, outcome.status, outcome.message, result=outcome.result, error=None)
        await self._tell(row.id, ended=True)
        return await self._find(principal, task_id)

    # --- driving --------------------------------------------------------------------------------------------------

    def _spawn(self, task_id: str, principal: Principal, *, claimed: bool) -> None:
        if self._group is not None and task_id not in self._driving:
            self._group.start_soon(self._drive, task_id, principal, claimed)

    async def _drive(self, task_id: str, principal: Principal, claimed: bool) -> None:
        if task_id in self._driving:
            return
        self._driving.add(task_id)
        try:
            if claimed or await run_orm(store.task_claim, task_id, self.driver_id, LEASE_SECONDS):
                await self._run_leased(task_id, principal)
        finally:
            self._driving.discard(task_id)
            with anyio.CancelScope(shield=True):  # a stopped process gives its lease back at once
                await run_orm(store.task_release, task_id, self.driver_id)

    async def _run_leased(self, task_id: str, principal: Principal) -> None:
        row = await run_orm(store.task_by_id, task_id)

        async def note(status: str, message: str) -> None:
            await run_orm(store.task_note, task_id, status, message)
            await self._tell(task_id)

        async with anyio.create_task_group() as group:
            group.start_soon(self._renew, task_id)
            try:
                finish = await self._kind(row).drive(row, principal, note)
            except Exception as error:  # the task must end visibly, whatever went wrong
                logger.exception("task %s of kind %s failed", task_id, row.kind)
                message = f"The task failed inside the server ({type(error).__name__}); try the request again."
                finish = Finish("failed", message, error={"code": INTERNAL_ERROR, "message": message})
            with anyio.CancelScope(shield=True):
                await run_orm(
                    store.task_finish, task_id, finish.status, finish.message, result=finish.result, error=finish.error
                )
                await self._tell(task_id, ended=True)
            group.cancel_scope.cancel()

    async def _tell(self, task_id: str, *, ended: bool = False) -> None:
        """Give the task's listener its row as it is now. A notification that cannot be sent (the client's stream
        is not open yet, or it went away) is lost, never an error: the client can always poll tasks/get."""
        listener = self._listeners.pop(task_id, None) if ended else self._listeners.get(task_id)
        if listener is None:
            return
        try:
            await listener(await run_orm(store.task_by_id, task_id))
        except Exception:
            logger.debug("task %s: a status notification could not be sent", task_id, exc_info=True)

    async def _renew(self, task_id: str) -> None:
        while True:
            await anyio.sleep(LEASE_SECONDS / 3)
            await run_orm(store.task_claim, task_id, self.driver_id, LEASE_SECONDS)

    # --- helpers --------------------------------------------------------------------------------------------------

    async def _find(self, principal: Principal, task_id: str) -> McpTask:
        row = await run_orm(store.task_find, _owner(principal), task_id)
        if row is None:
            raise TaskNotFound(task_id)
        return row

    def _kind(self, row: McpTask) -> TaskKind:
        kind = self.kinds.get(row.kind)
        if kind is None:
            raise TaskNotCancellable(f"Task {row.id} is of kind {row.kind!r}, which this server does not run.")
        return kind

    def _lease_alive(self, row: McpTask) -> bool:
        return bool(row.driver) and row.driver_until is not None and row.driver_until.timestamp() > time.time()


def _owner(principal: Principal) -> Owner:
    return Owner(principal.tenant_id, principal.principal_id)


def ttl_for(requested_ms: int | None, *, at_least_ms: int) -> int:
    """A task's ttl: what the client asked (or the default), never shorter than the task may need to end."""
    return max(requested_ms or DEFAULT_TTL_MS, at_least_ms)
