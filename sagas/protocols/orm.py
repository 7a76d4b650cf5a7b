"""Running synchronous ORM work from async protocol handlers, off the event loop, on long-lived threads.

Django's request signals never fire for MCP or A2A requests, so connections are handed back around each unit
(with the PostgreSQL pool, saga_project.database, closing returns the connection to the pool and the next unit
checks one out: no new backend per call). The units run on one bounded pool of threads kept for the life of the
process (`SAGA_ORM_THREADS`), not on a thread started for each request: a tool call then costs a queue hand-off,
not a thread's start and teardown. Each unit is a whole transaction of its own, so consecutive units of one
request need not share a thread. A unit that waits (run_ready_steps may wait up to a minute for its nodes) holds one
thread meanwhile; the pool grows up to its bound only when every thread it has is busy.

The caller's context variables (the current trace span, above all) travel with each unit.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import ParamSpec, TypeVar

from django.conf import settings
from django.db import close_old_connections

P = ParamSpec("P")
R = TypeVar("R")

_threads: ThreadPoolExecutor | None = None
_threads_lock = threading.Lock()


async def run_orm(fn: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
    """`fn(*args, **kwargs)` on a thread of the ORM pool, as one unit with its own database connection."""

    def unit() -> R:
        close_old_connections()
        try:
            return fn(*args, **kwargs)
        finally:
            close_old_connections()

    context = contextvars.copy_context()
    return await asyncio.get_running_loop().run_in_executor(_pool(), functools.partial(context.run, unit))


def _pool() -> ThreadPoolExecutor:
    global _threads
    if _threads is None:
        with _threads_lock:
            if _threads is None:
                _threads = ThreadPoolExecutor(max_workers=settings.SAGA_ORM_THREADS, thread_name_prefix="saga-orm")
    return _threads
