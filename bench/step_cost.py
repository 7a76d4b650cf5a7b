"""Per-step cost of the durable path vs the database's own commit cost (a first, quick measurement).

Superseded by the suite (`make bench`, bench/run.py), which also compares DBOS, Celery and MCP side by side; kept
as a small standalone probe.

Run: DATABASE_URL=postgresql://postgres@127.0.0.1:5432/bench .venv/bin/python bench/step_cost.py --steps 300
(the database must exist and be migrated: `semantic-saga migrate`). Compares, alternating rounds on one database:
- bare: one INSERT + COMMIT through Django's connection (the floor);
- immediate: `saga_step_execute` of the builtin no-op action;
- chained nodes: a linear DAG of no-op nodes run by `saga_run_ready` on the embedded executor (each outcome is
  recorded in the same commit that claims the next node).
Prints medians per step in milliseconds. Numbers drift on shared machines; compare within one run only.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "saga_project.settings")
# DEBUG off: with DEBUG on, Django records every query, which inflates the very cost this script measures.
os.environ.setdefault("SECRET_KEY", "bench-only-secret-key-not-for-production")
os.environ.setdefault("DEBUG", "false")

import django

django.setup()

from django.db import connection, transaction  # noqa: E402

from governance.identity.principal import local_principal  # noqa: E402
from registry.services import registry_load_file  # noqa: E402
from sagas import coordinator  # noqa: E402

ROUNDS = 5


def bare(n: int) -> float:
    with connection.cursor() as cursor:
        cursor.execute("CREATE TABLE IF NOT EXISTS bench_bare (id integer, payload text)")
    start = time.perf_counter()
    for i in range(n):
        with transaction.atomic(durable=True), connection.cursor() as cursor:
            cursor.execute("INSERT INTO bench_bare (id, payload) VALUES (%s, %s)", [i, "x"])
    return (time.perf_counter() - start) / n


def immediate(n: int) -> float:
    actor = local_principal()
    saga = coordinator.saga_begin(actor=actor)
    start = time.perf_counter()
    for _ in range(n):
        coordinator.saga_step_execute(actor=actor, saga_id=saga.id, action="noop", input={})
    return (time.perf_counter() - start) / n


def chained(n: int) -> float:
    actor = local_principal()
    saga = coordinator.saga_begin(actor=actor)
    previous: list[str] = []
    for i in range(n):
        node = coordinator.node_plan(actor=actor, saga_id=saga.id, action="noop", input={"i": i}, depends_on=previous)
        previous = [str(node.id)]
    start = time.perf_counter()
    report = coordinator.saga_run_ready(actor=actor, saga_id=saga.id, max_parallel=1, max_steps=1000, wait_seconds=300)
    assert report.count("COMPLETED") == n, report.as_dict()
    return (time.perf_counter() - start) / n


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200)
    args = parser.parse_args()
    registry_load_file(Path(__file__).resolve().parents[1] / "examples" / "action_registry.json")
    results: dict[str, list[float]] = {"bare INSERT+COMMIT": [], "immediate step": [], "chained node": []}
    for round_no in range(ROUNDS):
        results["bare INSERT+COMMIT"].append(bare(args.steps))
        results["immediate step"].append(immediate(args.steps))
        results["chained node"].append(chained(min(args.steps, 1000)))
        print(f"round {round_no + 1}/{ROUNDS} done", file=sys.stderr)
    floor = statistics.median(results["bare INSERT+COMMIT"])
    print(f"{connection.vendor}, {args.steps} steps x {ROUNDS} rounds (median per step)")
    for name, samples in results.items():
        median = statistics.median(samples)
        print(f"  {name:<20} {median * 1000:8.3f} ms   {median / floor:6.1f}x bare")


if __name__ == "__main__":
    main()
