"""Where a chained node's time goes: SQL statements per node (by verb and table), and optionally a cProfile.

Runs linear no-op sagas with the embedded executor made synchronous for the duration (this process's executor
pool object is swapped for one that runs each job in the calling thread), so every statement of the chained path
is seen by CaptureQueriesContext on one connection. Nothing in the coordinator is patched. Statements per node =
(statements of a 20-node run - statements of a 10-node run) / 10, so fixed per-run costs cancel out.

Standalone: .venv/bin/python bench/profile_chain.py [--profile] (uses the bench database, like bench/run.py).
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import io
import pstats
import re
import sys
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def classify(sql: str) -> str:
    """'UPDATE sagas_node' style label for one statement (verb and its table, outside any subquery); a
    compare-and-set written as `WITH changed AS (UPDATE ...) SELECT saga_expect_rows(...)` counts as its UPDATE."""
    head = sql.lstrip()
    checked = re.match(r"WITH\s+\w+\s+AS\s+\((UPDATE\b.*)\)\s+SELECT\s+saga_expect_rows", head, re.I | re.S)
    if checked:
        head = checked.group(1)
    verb = head.split(None, 1)[0].upper() if head else "?"
    if verb in ("SAVEPOINT", "RELEASE", "ROLLBACK"):
        return "SAVEPOINT/RELEASE"
    outer = head
    while True:  # drop innermost parentheses until none are left: what remains is the statement's own level
        stripped = re.sub(r"\([^()]*\)", " ", outer)
        if stripped == outer:
            break
        outer = stripped
    match = re.search(r'\b(?:FROM|INTO|UPDATE)\s+"?([A-Za-z_][\w]*)"?', outer, re.I)
    return f"{verb} {match.group(1)}" if match else verb


class _InlinePool:
    """Stands in for the embedded ThreadPoolExecutor: runs each job now, in the thread that submits it."""

    def submit(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> None:
        fn(*args, **kwargs)


@contextlib.contextmanager
def inline_executor() -> Iterator[None]:
    from sagas import executor

    saved = executor._pool
    executor._pool = _InlinePool()  # type: ignore[assignment]
    try:
        yield
    finally:
        executor._pool = saved


def _chain_run(length: int) -> list[str]:
    """Plan a `length`-node chain, then run it inline; the SQL of the run (not the planning)."""
    from django.conf import settings
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from governance.identity.principal import local_principal
    from sagas import coordinator
    from sagas.models import Node

    settings.CELERY_BROKER_URL = ""
    actor = local_principal()
    saga = coordinator.saga_begin(actor=actor, metadata={"bench": "profile"})
    previous: list[str] = []
    for i in range(length):
        node = coordinator.node_plan(actor=actor, saga_id=saga.id, action="noop", input={"i": i}, depends_on=previous)
        previous = [str(node.id)]
    with inline_executor(), CaptureQueriesContext(connection) as captured:
        coordinator.saga_run_ready(actor=actor, saga_id=saga.id, max_parallel=1, max_steps=1000, wait_seconds=0)
    done = Node.objects.filter(saga_id=saga.id, status="COMPLETED").count()
    if done != length:
        raise RuntimeError(f"inline chained run completed {done} of {length} nodes")
    return [q["sql"] for q in captured.captured_queries]


def queries_per_node() -> dict[str, Any]:
    short, long = _chain_run(10), _chain_run(20)
    by_kind = Counter(classify(q) for q in long)
    by_kind.subtract(Counter(classify(q) for q in short))
    per_kind = {k: v / 10 for k, v in sorted(by_kind.items(), key=lambda kv: -kv[1]) if v}
    return {"statements_per_node": (len(long) - len(short)) / 10, "by_kind": per_kind}


def immediate_pair(iterations: int = 20) -> dict[str, Any]:
    """What an MCP begin_saga + execute_saga_step costs without MCP: the two coordinator calls in this process.

    Statements are counted on one pair; time is the median over `iterations` pairs.
    """
    import time

    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from governance.identity.principal import local_principal
    from sagas import coordinator

    actor = local_principal()

    def pair() -> None:
        saga = coordinator.saga_begin(actor=actor, metadata={"bench": "immediate"})
        coordinator.saga_step_execute(actor=actor, saga_id=saga.id, action="noop", input={})

    pair()  # warm-up
    with CaptureQueriesContext(connection) as captured:
        pair()
    samples: list[float] = []
    for _ in range(iterations):
        started = time.perf_counter()
        pair()
        samples.append(time.perf_counter() - started)
    samples.sort()
    return {"statements": len(captured.captured_queries), "seconds_p50": samples[len(samples) // 2]}


def profile(length: int = 100, top: int = 25) -> str:
    """cProfile of one inline chained run of `length` nodes: the top functions by cumulative and own time."""
    profiler = cProfile.Profile()
    profiler.enable()
    _chain_run(length)
    profiler.disable()
    out = io.StringIO()
    stats = pstats.Stats(profiler, stream=out)
    stats.sort_stats("cumulative").print_stats(top)
    stats.sort_stats("tottime").print_stats(top)
    return out.getvalue()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", action="store_true", help="also print a cProfile of a 100-node chained run")
    args = parser.parse_args()
    from bench.common import setup_django

    setup_django()
    counts = queries_per_node()
    print(f"SQL statements per chained node: {counts['statements_per_node']:.1f}")
    for kind, n in counts["by_kind"].items():
        print(f"  {n:5.1f}  {kind}")
    pair = immediate_pair()
    print(
        f"saga_begin + saga_step_execute(noop) in process: {pair['statements']} statements, "
        f"{pair['seconds_p50'] * 1000:.1f} ms"
    )
    if args.profile:
        print(profile())


if __name__ == "__main__":
    main()
