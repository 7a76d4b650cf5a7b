"""Whether a tools/call may be answered with a task, and how the task handle reaches the wire.

A client negotiates per request: in 2025-11-25 by a `task` member in tools/call params (after the server
advertised `capabilities.tasks.requests.tools.call`), in 2026-07-28 by listing the tasks extension in the
request's `_meta` client capabilities (the server then decides). `AnswerWithTask`, a server middleware, reads that
into a slot for the request; the handler asks `requested()` and, when it creates a task, returns the note
`announce()` gives.

Why a middleware: the mcp 2.3 server checks a 2025-11-25 tools/call handler's answer against CallToolResult,
which has no CreateTaskResult arm, so a handler cannot return a task handle itself. The middleware runs outside
that check and replaces the note with the era's CreateTaskResult (in 2026-07-28 too, keeping the SDK's
`serverInfo` stamp). A 2025-11-25 client that asked for a task always gets one: a call answered at once becomes a
task born completed with that answer.
"""

from __future__ import annotations

import contextvars
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, cast

import mcp.types as types
from mcp.server import ServerRequestContext
from mcp.server.context import CallNext, HandlerResult

from sagas.models import McpTask
from sagas.protocols.mcp.tasks import wire


@dataclass(frozen=True)
class TaskRequest:
    """The client of this request accepts a task as the answer."""

    protocol_version: str
    ttl_ms: int | None = None  # what a 2025-11-25 client asked to keep it for
    explicit: bool = False  # 2025-11-25: the client asked for a task, so it must get one


@dataclass
class _Slot:
    request: TaskRequest
    task: McpTask | None = None


_SLOT: contextvars.ContextVar[_Slot | None] = contextvars.ContextVar("semantic_saga_mcp_task_slot", default=None)

# Makes the task of an explicit request that was answered at once: (the request, the answer) -> the task row.
Settle = Callable[[TaskRequest, dict[str, Any]], Awaitable[McpTask]]


def requested() -> TaskRequest | None:
    """What the tools/call being handled negotiated: a TaskRequest, or None (answer it the usual way)."""
    slot = _SLOT.get()
    return slot.request if slot is not None else None


def status_listener(ctx: ServerRequestContext[Any]) -> Callable[[McpTask], Awaitable[None]] | None:
    """What tells the client of this 2025-11-25 request about its task's status changes (notifications/tasks/status
    on the session's own stream, not the request's, which has ended); None in 2026-07-28, whose status
    notifications travel on subscriptions/listen."""
    if wire.is_modern(ctx.protocol_version):
        return None
    session = ctx.session
    version = ctx.protocol_version

    async def tell(row: McpTask) -> None:
        params = types.TaskStatusNotificationParams.model_validate(wire.task_object(row, version))
        # mcp 2.3 leaves this 2025-11-25 notification out of its ServerNotification union; it sends it as any other.
        await session.send_notification(cast(Any, types.TaskStatusNotification(params=params)))

    return tell


def announce(row: McpTask) -> types.CallToolResult:
    """The handler's answer for a request now answered by task `row` (AnswerWithTask puts the handle on the wire in
    its place)."""
    slot = _SLOT.get()
    if slot is None:
        raise RuntimeError("announce() outside a task-negotiated request: check requested() first")
    slot.task = row
    text = (
        f"This call is answered by task {row.id}: {row.status_message or row.status}. "
        "Poll tasks/get for its status; tasks/result (or tasks/get once it is completed) gives its result."
    )
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], _meta=wire.related(row.id))


def _negotiated(ctx: ServerRequestContext[Any]) -> TaskRequest | None:
    if wire.is_modern(ctx.protocol_version):
        return TaskRequest(ctx.protocol_version) if wire.client_declares_tasks(ctx.meta) else None
    task = (ctx.params or {}).get("task")
    if ctx.protocol_version == wire.LEGACY and isinstance(task, dict):
        ttl = task.get("ttl")
        return TaskRequest(ctx.protocol_version, ttl_ms=ttl if isinstance(ttl, int) else None, explicit=True)
    return None


class AnswerWithTask:
    """Server middleware around tools/call (see the module docstring)."""

    def __init__(self, settle: Settle) -> None:
        self.settle = settle

    async def __call__(self, ctx: ServerRequestContext[Any], call_next: CallNext) -> HandlerResult:
        wanted = _negotiated(ctx) if ctx.method == "tools/call" else None
        if wanted is None:
            return await call_next(ctx)
        slot = _Slot(wanted)
        token = _SLOT.set(slot)
        try:
            answer = await call_next(ctx)
        finally:
            _SLOT.reset(token)
        dumped = answer if isinstance(answer, dict) else {}
        if slot.task is None and wanted.explicit:
            slot.task = await self.settle(wanted, dumped)
        if slot.task is None:
            return answer
        return wire.created(slot.task, wanted.protocol_version, dumped)
