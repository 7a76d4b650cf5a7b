"""DBOS Transact running the same 10-step no-op workflow on the same PostgreSQL server (its own system database).

DBOS runs in this process (its executor threads, like our embedded executor). Per-step latency is the interval
between two consecutive step returns inside one workflow (each step's output is checkpointed before it returns);
a batch's time runs from just before the first `start_workflow` to the last `get_result`.
"""

from __future__ import annotations

import itertools
import time
from typing import Any

from dbos import DBOS, DBOSConfig

from bench.common import DBOS_DB, ensure_database, pg_url

CHAIN_LENGTH = 10
_MARKS: dict[str, list[float]] = {}


@DBOS.step()
def noop_step(i: int) -> dict[str, Any]:
    return {}


@DBOS.workflow()
def chain_workflow(length: int) -> int:
    marks = [time.perf_counter()]
    for i in range(length):
        noop_step(i)
        marks.append(time.perf_counter())
    workflow_id = DBOS.workflow_id
    if workflow_id is not None:
        _MARKS[workflow_id] = marks
    return length


class DbosBench:
    def __init__(self) -> None:
        ensure_database(DBOS_DB)
        config: DBOSConfig = {
            "name": "saga-bench",
            "system_database_url": pg_url(DBOS_DB),
            "log_level": "WARNING",
        }
        DBOS(config=config)
        DBOS.launch()

    def chained(self, concurrency: int) -> tuple[float, int, list[float]]:
        """(seconds, steps, per-step intervals) for `concurrency` workflows started at once."""
        _MARKS.clear()
        started = time.perf_counter()
        handles = [DBOS.start_workflow(chain_workflow, CHAIN_LENGTH) for _ in range(concurrency)]
        for handle in handles:
            handle.get_result()
        seconds = time.perf_counter() - started
        intervals: list[float] = []
        for marks in _MARKS.values():
            intervals.extend(b - a for a, b in itertools.pairwise(marks[1:]))
        return seconds, concurrency * CHAIN_LENGTH, intervals

    def close(self) -> None:
        DBOS.destroy()
