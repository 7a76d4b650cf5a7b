"""Our coordinator on the no-op action: linear sagas of 10 nodes (depends_on chain) and a 1 -> 16 -> 1 fan-out,
planned with `node_plan`, run with `saga_run_ready`, on the embedded executor or on Celery workers.

Timing comes from the journal itself, not from polling: a step row is written EXECUTING in the commit that
completes its predecessor (chained commit), so the interval between two consecutive steps' `created_at` in one
saga is one full chained cycle (call the action, record COMPLETED(N) and claim N+1, commit). A batch's time runs
from just before the first `saga_run_ready` call to the last step's `updated_at`.
"""

from __future__ import annotations

import itertools
import time
import uuid
from collections import Counter, defaultdict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.db import connection

from bench.common import poll

CHAIN_LENGTH = 10
FANOUT_WIDTH = 16
PLANNER_THREADS = 4
# States a healthy no-op run passes through; anything else means the run broke and the figure would be wrong.
HEALTHY = {"WAITING_DEPENDENCY", "READY", "EXECUTING", "COMPLETED"}


@dataclass
class BatchResult:
    sagas: int
    steps: int
    seconds: float
    step_samples: list[float] = field(default_factory=list)

    @property
    def steps_per_second(self) -> float:
        return self.steps / self.seconds if self.seconds > 0 else float("nan")


def chain_intervals(rows: list[tuple[Any, int, float]]) -> list[float]:
    """(saga_id, sequence, created_at epoch) rows -> seconds between consecutive steps of each saga."""
    by_saga: dict[Any, list[tuple[int, float]]] = defaultdict(list)
    for saga_id, sequence, created in rows:
        by_saga[saga_id].append((sequence, created))
    out: list[float] = []
    for steps in by_saga.values():
        steps.sort()
        out.extend(b[1] - a[1] for a, b in itertools.pairwise(steps))
    return out


class SagaBench:
    def __init__(self, broker_url: str) -> None:
        from governance.identity.principal import local_principal

        self.broker_url = broker_url
        self.actor = local_principal()
        self.executor = "embedded"
        # Sagas planned ahead (during start-up, untimed) and taken by the timed runs; shortfalls are planned on demand.
        self.stock: dict[str, list[uuid.UUID]] = {"chain": [], "fanout": []}
        self.ran_chains: list[uuid.UUID] = []  # chained sagas that ran, newest last (the audit phase reads them)

    def use(self, executor: str, broker_url: str | None = None) -> None:
        """Switch this process between the embedded executor and publishing nudges to Celery on our Redis."""
        from saga_project.celery import app as celery_app

        self.executor = executor
        url = (broker_url or self.broker_url) if executor == "celery" else ""
        settings.CELERY_BROKER_URL = url
        if url:
            celery_app.set_current()  # shared_task nudges publish through the current app
            celery_app.conf.broker_url = url
            celery_app._pool = None  # the producer pool was built for the old URL
            celery_app.amqp._producer_pool = None

    # --- planning (not timed) ---------------------------------------------------------------------------------------

    def _plan_one(self, shape: str) -> uuid.UUID:
        from sagas import coordinator

        try:
            saga = coordinator.saga_begin(actor=self.actor, metadata={"bench": shape})
            plan = coordinator.node_plan
            if shape == "chain":
                previous: list[str] = []
                for i in range(CHAIN_LENGTH):
                    node = plan(actor=self.actor, saga_id=saga.id, action="noop", input={"i": i}, depends_on=previous)
                    previous = [str(node.id)]
            else:
                root = plan(actor=self.actor, saga_id=saga.id, action="noop", input={"i": "root"})
                leaves = [
                    str(
                        plan(
                            actor=self.actor, saga_id=saga.id, action="noop", input={"i": i}, depends_on=[str(root.id)]
                        ).id
                    )
                    for i in range(FANOUT_WIDTH)
                ]
                plan(actor=self.actor, saga_id=saga.id, action="noop", input={"i": "join"}, depends_on=leaves)
            return saga.id
        finally:
            connection.close()  # a planner thread's own connection

    def plan(self, shape: str, count: int) -> list[uuid.UUID]:
        with ThreadPoolExecutor(max_workers=min(PLANNER_THREADS, count)) as pool:
            return list(pool.map(lambda _: self._plan_one(shape), range(count)))

    def prepare(self, shape: str, count: int) -> None:
        if count > 0:
            self.stock[shape].extend(self.plan(shape, count))

    def take(self, shape: str, count: int) -> list[uuid.UUID]:
        stock = self.stock[shape]
        taken, self.stock[shape] = stock[:count], stock[count:]
        return taken + (self.plan(shape, count - len(taken)) if len(taken) < count else [])

    # --- running (timed) --------------------------------------------------------------------------------------------

    def run(self, saga_ids: list[uuid.UUID], *, max_parallel: int, timeout: float = 180) -> BatchResult:
        from sagas import coordinator
        from sagas.models import Node, Step

        started = time.time()
        for saga_id in saga_ids:
            coordinator.saga_run_ready(
                actor=self.actor, saga_id=saga_id, max_parallel=max_parallel, max_steps=100, wait_seconds=0
            )
        expected = Node.objects.filter(saga_id__in=saga_ids).count()

        def done() -> bool:
            counts = Counter(Node.objects.filter(saga_id__in=saga_ids).values_list("status", flat=True))
            broken = set(counts) - HEALTHY
            if broken:
                raise RuntimeError(f"{self.executor} run broke: node states {dict(counts)}")
            return counts.get("COMPLETED", 0) == expected

        poll(done, timeout, f"{len(saga_ids)} sagas on the {self.executor} executor", interval=0.01)
        self._check_executor(saga_ids)
        rows = list(
            Step.objects.filter(saga_id__in=saga_ids).values_list("saga_id", "sequence", "created_at", "updated_at")
        )
        finished = max(r[3] for r in rows).timestamp()
        intervals = chain_intervals([(r[0], r[1], r[2].timestamp()) for r in rows])
        return BatchResult(sagas=len(saga_ids), steps=len(rows), seconds=finished - started, step_samples=intervals)

    def _check_executor(self, saga_ids: list[uuid.UUID]) -> None:
        """The journal names the process that started each step: embedded runs must be this process alone,
        Celery runs never this process; anything else (a stray sweeper re-sending nudges) would skew the figure."""
        from audit.models import AuditEvent
        from sagas.coordinator._leases import worker_id

        starters = Counter(
            AuditEvent.objects.filter(saga_id__in=saga_ids, event_type="STEP_STARTED").values_list(
                "data__worker", flat=True
            )
        )
        if not starters or None in starters:
            return  # the journal does not say (an older or newer event shape): nothing to check
        me = worker_id()
        wrong = {w: n for w, n in starters.items() if (w != me) == (self.executor == "embedded")}
        if wrong:
            raise RuntimeError(f"{self.executor} run: steps started by unexpected workers {wrong} (this process: {me})")

    def chained(self, concurrency: int) -> BatchResult:
        ids = self.take("chain", concurrency)
        result = self.run(ids, max_parallel=1)
        self.ran_chains.extend(ids)
        return result

    def fanout(self) -> BatchResult:
        """One saga: root, 16 independent nodes, join; the fan-out runs up to 16 nodes at once."""
        return self.run(self.take("fanout", 1), max_parallel=FANOUT_WIDTH)
