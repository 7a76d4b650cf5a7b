"""notifications/progress for the long saga tools, when the client sent a progress token.

While run_ready_steps or rollback_saga runs (a blocking call: the request stays open up to its wait_seconds), the
saga is read every POLL_SECONDS and a notification goes out each time the count of finished work grew: nodes
completed of those planned (with the current dependency wave), or steps compensated of those to undo. The spec
wants the progress value to increase with every notification, so an unchanged count sends nothing. A call without
a progress token costs nothing extra.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import anyio
from mcp.server import ServerRequestContext

from governance.errors import ServiceError
from governance.identity.principal import Principal
from sagas.operations.invoke import invoke
from sagas.operations.table import MCP_TOOLS
from sagas.protocols.mcp.saga_tasks import progress_message
from sagas.protocols.orm import run_orm

PROGRESS_TOOLS = frozenset({"run_ready_steps", "rollback_saga"})
POLL_SECONDS = 0.5
UNDONE = ("COMPENSATED", "COMPENSATION_FAILED")
TO_UNDO = ("COMPLETED", "COMPENSATING", *UNDONE)

T = TypeVar("T")


def progress_token(ctx: ServerRequestContext[Any] | None) -> str | int | None:
    meta: dict[str, Any] = dict(ctx.meta or {}) if ctx is not None else {}
    token = meta.get("progress_token", meta.get("progressToken"))  # the SDK's name, or the wire's
    return token if isinstance(token, str | int) and not isinstance(token, bool) else None


async def with_progress(
    ctx: ServerRequestContext[Any] | None,
    tool: str,
    principal: Principal,
    saga_id: str,
    work: Callable[[], Awaitable[T]],
) -> T:
    """`await work()`, reporting the saga's progress meanwhile if the request asked for it."""
    token = progress_token(ctx)
    if ctx is None or token is None or tool not in PROGRESS_TOOLS:
        return await work()
    reporter = _Reporter(ctx, tool, principal, saga_id)
    async with anyio.create_task_group() as group:
        group.start_soon(reporter.watch)
        try:
            answer = await work()
        finally:
            group.cancel_scope.cancel()
    await reporter.report()  # what the call achieved since the last look
    return answer


class _Reporter:
    def __init__(self, ctx: ServerRequestContext[Any], tool: str, principal: Principal, saga_id: str) -> None:
        self.ctx, self.tool, self.principal, self.saga_id = ctx, tool, principal, saga_id
        self.sent = -1.0

    async def watch(self) -> None:
        while await self.report():
            await anyio.sleep(POLL_SECONDS)

    async def report(self) -> bool:
        """Notify if more is done than last said; false when the saga cannot be read (the call will say why)."""
        try:
            saga = await run_orm(invoke, MCP_TOOLS["get_saga"], self.principal, self._ref())
        except ServiceError:
            return False
        done, total, message = progress_of(self.tool, saga)
        if done > self.sent:
            self.sent = done
            await self.ctx.session.report_progress(done, total, message)  # against this request's token
        return True

    def _ref(self) -> Any:
        return MCP_TOOLS["get_saga"].arguments.model_validate({"saga_id": self.saga_id})


def progress_of(tool: str, saga: dict[str, Any]) -> tuple[float, float | None, str]:
    """(done, total, message) for the tool's kind of work."""
    if tool == "rollback_saga":
        steps = [step for step in saga.get("steps") or [] if step["status"] in TO_UNDO]
        undone = sum(1 for step in steps if step["status"] in UNDONE)
        return float(undone), float(len(steps)), f"{undone} of {len(steps)} steps compensated; saga {saga['status']}"
    nodes = (saga.get("workflow") or {}).get("nodes") or []
    done = sum(1 for node in nodes if node["status"] == "COMPLETED")
    return float(done), float(len(nodes)), progress_message(saga)
