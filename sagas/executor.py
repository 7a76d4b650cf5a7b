"""Performs one action call (forward or compensation), never inside a database transaction, and hosts the embedded
executor's thread pool and the fan-out threads (sagas.coordinator.execution.fan_out) of every process, Celery workers
too.

Failures become an `Outcome` instead of an exception so the coordinator can record them; an unexpected error in
action code is treated as uncertain, because we cannot know how far it got before raising. Leases and their
heartbeats are the coordinator's (sagas.coordinator._leases): it keeps the lease alive around the call.

Inside `shared_connections()` (the undo walk) a thread's `kind: mcp` calls share one connection per downstream
server (registry.actions.mcp.shared_connections) instead of opening one each.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar

from django.conf import settings
from django.db import connection, connections

from registry.actions import InvocationContext, invoke_compensation, invoke_forward
from registry.errors import ActionFailure

logger = logging.getLogger("sagas.executor")

JobResult = TypeVar("JobResult")


@dataclass(frozen=True)
class Outcome:
    ok: bool
    result: Any = None
    error: dict[str, Any] | None = None
    retryable: bool = False
    uncertain: bool = False


_scope = threading.local()  # this thread's open shared_connections() block: its exit stack, and what it shares


@contextlib.contextmanager
def shared_connections() -> Iterator[None]:
    """Inside the block, this thread's `kind: mcp` calls share one connection per downstream server, opened on
    first use and closed when the block ends (registry.actions.mcp.shared_connections); other threads are not
    affected. Re-entrant. The MCP SDK is imported only once an MCP call runs, as outside a block."""
    if getattr(_scope, "stack", None) is not None:
        yield
        return
    with contextlib.ExitStack() as stack:
        _scope.stack, _scope.mcp = stack, False
        try:
            yield
        finally:
            _scope.stack = None


def _share(definition: dict[str, Any]) -> None:
    stack: contextlib.ExitStack | None = getattr(_scope, "stack", None)
    if stack is not None and not _scope.mcp and definition.get("kind") == "mcp":
        from registry.actions.mcp import shared_connections as mcp_shared

        stack.enter_context(mcp_shared())
        _scope.mcp = True


def perform(definition: dict[str, Any], ctx: InvocationContext, *, compensation: bool) -> Outcome:
    if connection.in_atomic_block:
        # A side effect inside a transaction could be rolled back in the database but not in the world.
        raise RuntimeError("refusing to call an action inside a database transaction")
    _share(definition)
    call = invoke_compensation if compensation else invoke_forward
    try:
        return Outcome(ok=True, result=call(definition, ctx))
    except ActionFailure as failure:
        return Outcome(ok=False, error=failure.as_dict(), retryable=failure.retryable, uncertain=failure.uncertain)
    except Exception as exc:
        logger.exception("action raised unexpectedly saga_id=%s step_id=%s", ctx.saga_id, ctx.step_id)
        error = {
            "code": "ACTION_CRASHED",
            "message": f"The action raised {type(exc).__name__}; its effect is unknown. An operator should check "
            "the target system before retrying with force=true, or roll back.",
            "retryable": False,
            "uncertain": True,
        }
        return Outcome(ok=False, error=error, retryable=False, uncertain=True)


_pool: ThreadPoolExecutor | None = None
_fan_out_pool: ThreadPoolExecutor | None = None
_fan_out_lock = threading.Lock()


def pool() -> ThreadPoolExecutor:
    """The embedded executor: independent ready nodes of this process run on these threads."""
    global _pool
    if _pool is None:
        _pool = ThreadPoolExecutor(max_workers=settings.SAGA_EXECUTOR_THREADS, thread_name_prefix="saga-exec")
    return _pool


def in_worker_thread(fn: Callable[[], JobResult]) -> Callable[[], JobResult]:
    """Wrap work for a pool thread: errors are logged (a nudge has no caller to tell), connections closed (with
    the PostgreSQL pool, returned to it: the next job reuses the backend; a broken one is replaced)."""

    def run() -> JobResult:
        try:
            return fn()
        except Exception:
            logger.exception("embedded executor job failed; the recovery sweep will pick up what it left")
            raise
        finally:
            connections.close_all()

    return run


def submit(job: Callable[[], Any]) -> None:
    pool().submit(job)


def submit_fan_out(job: Callable[[], Any]) -> None:
    """Run a node claimed in a finishing node's commit on this process's fan-out threads
    (sagas.coordinator.execution.fan_out reserves a thread before each claim, so a job never queues behind others)."""
    global _fan_out_pool
    with _fan_out_lock:  # two threads' first fan-outs at once must not build two pools
        if _fan_out_pool is None:
            # Sized once: a thread count raised later (tests) only queues the surplus, it never loses a job.
            _fan_out_pool = ThreadPoolExecutor(
                max_workers=max(1, settings.SAGA_FAN_OUT_THREADS), thread_name_prefix="saga-fan-out"
            )
    _fan_out_pool.submit(job)
