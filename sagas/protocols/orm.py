"""Running synchronous ORM work from async protocol handlers, off the event loop.

Django's request signals never fire for MCP or A2A requests, so connections are closed here around each unit
(with the PostgreSQL pool, saga_project.database, closing hands the connection back to the pool, and the next unit
checks one out: no new backend per call); with asgiref's ThreadSensitiveContext around the protocol app, each
request gets its own thread instead of all requests queueing on one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ParamSpec, TypeVar

from asgiref.sync import sync_to_async
from django.db import close_old_connections

P = ParamSpec("P")
R = TypeVar("R")


async def run_orm(fn: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
    def unit() -> R:
        close_old_connections()
        try:
            return fn(*args, **kwargs)
        finally:
            close_old_connections()

    return await sync_to_async(unit, thread_sensitive=True)()
