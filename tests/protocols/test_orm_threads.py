"""ORM units of MCP and A2A handlers (sagas.protocols.orm.run_orm), as a handler sees them: each runs off the event
loop's thread with the caller's context (its trace span), concurrent units run side by side, and however many a
burst of requests sends, no more than SAGA_ORM_THREADS run at once or threads are used: the rest wait their turn
and all of them finish."""

from __future__ import annotations

import asyncio
import contextvars
import threading
import time

from django.conf import settings

from sagas.protocols.orm import run_orm

REQUEST = contextvars.ContextVar("request", default="none")


def _where() -> tuple[int, str]:
    return threading.get_ident(), REQUEST.get()


def test_each_unit_runs_off_the_event_loop_with_the_callers_context() -> None:
    async def calls() -> tuple[int, list[tuple[int, str]]]:
        seen = []
        for n in range(20):
            REQUEST.set(f"call-{n}")
            seen.append(await run_orm(_where))
        return threading.get_ident(), seen

    loop_thread, seen = asyncio.run(calls())
    assert [context for _, context in seen] == [f"call-{n}" for n in range(20)]
    assert loop_thread not in {thread for thread, _ in seen}


def test_concurrent_units_run_at_the_same_time() -> None:
    meeting = threading.Barrier(3, timeout=10)

    def meet() -> int:
        meeting.wait()  # only passes if three units are in flight together
        return threading.get_ident()

    async def together() -> list[int]:
        return list(await asyncio.gather(*(run_orm(meet) for _ in range(3))))

    assert len(set(asyncio.run(together()))) == 3


def test_a_burst_beyond_the_bound_waits_its_turn_and_every_unit_finishes() -> None:
    bound = settings.SAGA_ORM_THREADS
    lock = threading.Lock()
    running, most, threads = 0, 0, set()

    def unit(n: int) -> int:
        nonlocal running, most
        with lock:
            running += 1
            most = max(most, running)
            threads.add(threading.get_ident())
        time.sleep(0.01)  # long enough for the burst to pile up behind the bound
        with lock:
            running -= 1
        return n

    async def burst() -> list[int]:
        return list(await asyncio.gather(*(run_orm(unit, n) for n in range(bound * 3))))

    assert asyncio.run(burst()) == list(range(bound * 3))
    assert most <= bound and len(threads) <= bound
