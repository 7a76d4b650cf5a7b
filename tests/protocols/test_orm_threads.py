"""ORM units of MCP and A2A handlers run on long-lived threads (sagas.protocols.orm): consecutive calls reuse a
waiting thread instead of starting one each, concurrent ones get threads of their own, and the caller's context
(its trace span) travels with each unit."""

from __future__ import annotations

import asyncio
import contextvars
import threading

from sagas.protocols import orm
from sagas.protocols.orm import run_orm

REQUEST = contextvars.ContextVar("request", default="none")


def _where() -> tuple[int, str]:
    return threading.get_ident(), REQUEST.get()


def test_consecutive_units_reuse_a_thread_and_see_the_callers_context() -> None:
    async def calls() -> list[tuple[int, str]]:
        seen = []
        for n in range(20):
            REQUEST.set(f"call-{n}")
            seen.append(await run_orm(_where))
        return seen

    seen = asyncio.run(calls())
    assert [context for _, context in seen] == [f"call-{n}" for n in range(20)]
    # Threads are reused, not started per call. (A call that follows its predecessor within microseconds can find
    # the thread not yet back to idle and start one more, once, up to the pool's bound: hence not exactly one.)
    assert len({thread for thread, _ in seen}) < 10
    assert len(orm._pool()._threads) <= orm._pool()._max_workers
    assert threading.get_ident() not in {thread for thread, _ in seen}  # never on the event loop's thread


def test_concurrent_units_run_at_the_same_time() -> None:
    meeting = threading.Barrier(3, timeout=10)

    def meet() -> int:
        meeting.wait()  # only passes if three units are in flight together
        return threading.get_ident()

    async def together() -> list[int]:
        return list(await asyncio.gather(*(run_orm(meet) for _ in range(3))))

    assert len(set(asyncio.run(together()))) == 3
