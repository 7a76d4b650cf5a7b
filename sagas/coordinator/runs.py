"""Run requests: start (or re-budget) a saga's run, nudge its ready nodes, and optionally wait for the wave.

A run is data on the saga row (`run_max_parallel`, `run_steps_left`, who asked), so any worker, in any process,
can continue it: after each outcome the worker that recorded it claims or nudges the nodes that became ready
(sagas.coordinator.execution.node_attempts.dispatch_ready). The caller here only waits and reports what it sees.
"""

from __future__ import annotations

import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from django.utils import timezone

from audit.models import EventType as E
from governance.identity.principal import Principal
from governance.identity.rbac import EXECUTE, authorize
from sagas.coordinator import policy
from sagas.coordinator._tx import Refusal, locked_saga
from sagas.coordinator.execution.node_attempts import dispatch_ready
from sagas.coordinator.execution.run_changes import RUN_CHANGES
from sagas.coordinator.previews import dry_run_nodes
from sagas.coordinator.quotas import check_concurrent_runs
from sagas.errors import InvalidInput, InvalidTransition
from sagas.models import Node, Saga
from sagas.states import NodeStatus, SagaStatus

# How long run_ready waits for the wave by default, and at most. Longer work keeps running on the workers; the
# answer then says what is still in flight, and get_saga shows the rest.
DEFAULT_WAIT_SECONDS = 60.0
MAX_WAIT_SECONDS = 300.0
# Poll interval while waiting: starts short so quick waves return fast, backs off to spare the database.
POLL_START_SECONDS = 0.01
POLL_MAX_SECONDS = 0.2
# Sagas in these states may still change on their own (rollback pending or running).
UNSETTLED_SAGA_STATES = frozenset({SagaStatus.FAILED, SagaStatus.ROLLING_BACK})


@dataclass
class RunReport:
    saga: Saga
    steps_started: int
    node_counts: dict[str, int] = field(default_factory=dict)
    in_flight: list[dict[str, Any]] = field(default_factory=list)
    retry_pending: list[dict[str, Any]] = field(default_factory=list)
    settled: bool = True
    stopped_because: str = "no_ready_nodes"

    def count(self, status: str) -> int:
        return self.node_counts.get(status, 0)

    def as_dict(self) -> dict[str, Any]:
        return {
            "steps_started": self.steps_started,
            "node_counts": self.node_counts,
            "in_flight": self.in_flight,
            "retry_pending": self.retry_pending,
            "settled": self.settled,
            "stopped_because": self.stopped_because,
        }


def _require_int(value: object, name: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise InvalidInput(message=f"{name} must be an integer from {low} to {high}, got {value!r}.")
    return value


def _wait_bound(wait_seconds: float | None) -> float:
    if wait_seconds is None:
        return DEFAULT_WAIT_SECONDS
    if isinstance(wait_seconds, bool) or not isinstance(wait_seconds, int | float) or wait_seconds < 0:
        raise InvalidInput(message=f"wait_seconds must be a number from 0 to {MAX_WAIT_SECONDS:g}.")
    return min(float(wait_seconds), MAX_WAIT_SECONDS)


def saga_run_ready(
    *,
    actor: Principal,
    saga_id: object,
    max_parallel: int = 4,
    max_steps: int = 100,
    wait_seconds: float | None = None,
) -> RunReport:
    """Run ready nodes in dependency waves on the workers (or the embedded executor). Needs ACTIVE.

    Sets the saga's run budget (at most `max_parallel` nodes in flight at once across all workers, at most
    `max_steps` attempts started) and nudges the nodes ready now; workers continue with nodes that become ready
    until none is, the budget is spent, or the saga leaves ACTIVE. Waits up to `wait_seconds` (default 60, at
    most 300; 0 = do not wait) for the wave to settle, including a rollback it triggered, then reports the state
    and what is still in flight. Audit RUN_REQUESTED. Errors: SAGA_NOT_FOUND, SAGA_NOT_ACTIVE, INVALID_INPUT,
    QUOTA_EXCEEDED (SAGA_MAX_CONCURRENT_RUNS_PER_TENANT).
    """
    authorize(actor, EXECUTE, "run")
    _require_int(max_parallel, "max_parallel", 1, 32)
    _require_int(max_steps, "max_steps", 1, 1000)
    deadline = time.monotonic() + _wait_bound(wait_seconds)
    with locked_saga(saga_id, actor) as tx:
        if tx.saga.status != SagaStatus.ACTIVE:
            hint = (
                " Retry the failed node or roll back first." if tx.saga.status == SagaStatus.RECOVERY_REQUIRED else ""
            )
            raise InvalidTransition(
                "SAGA_NOT_ACTIVE",
                f"Saga {tx.saga.id} is {tx.saga.status}; running steps needs ACTIVE. Nothing ran.{hint}",
            )
        if stop := policy.kill_switch_stop(tx, "running ready steps"):
            raise Refusal(stop)
        check_concurrent_runs(actor, tx.saga.id)
        decision = policy.decide(tx, "run", requested_parallel=max_parallel)
        if not decision.allowed:
            raise Refusal(policy.refusal(decision, f"running saga {tx.saga.id}"))
        tx.update(
            tx.saga,
            run_max_parallel=max_parallel,
            run_steps_left=max_steps,
            run_principal_id=actor.principal_id,
            run_principal_type=actor.principal_type,
        )
        tx.record(E.RUN_REQUESTED, status=tx.saga.status, data={"max_parallel": max_parallel, "max_steps": max_steps})
        if tx.saga.preview:
            dry_run_nodes(tx)  # a preview runs nothing: every pending node is evaluated and journaled DRY now
        else:
            dispatch_ready(tx, chain=False)
    return _wait_and_report(tx.saga.id, max_steps, deadline)


def saga_run_stop(*, actor: Principal, saga_id: object) -> RunReport:
    """Stop scheduling a saga's run: no further attempt starts (its step budget becomes 0).

    Attempts already in flight are never interrupted (a side effect halfway is worse than one finished): they end
    as they will, and their dependants stay READY for a later run_ready_steps. Audit RUN_STOPPED with the budget that
    was left (nothing is recorded when no run was going on). Reports the run as it stands. Errors: SAGA_NOT_FOUND.
    """
    authorize(actor, EXECUTE, "run")
    with locked_saga(saga_id, actor) as tx:
        left = tx.saga.run_steps_left
        if left:
            tx.update(tx.saga, run_steps_left=0)
            tx.record(E.RUN_STOPPED, status=tx.saga.status, data={"steps_left": left})
    return run_report(tx.saga.id, 0)


def _wait_and_report(saga_id: uuid.UUID, max_steps: int, deadline: float) -> RunReport:
    pause = POLL_START_SECONDS
    seen = RUN_CHANGES.watch(saga_id)
    try:
        while True:
            report = run_report(saga_id, max_steps)
            if report.settled or time.monotonic() >= deadline:
                if not report.settled:
                    report.stopped_because = "wait_timeout"
                return report
            # Woken by an outcome recorded in this process; the back-off poll covers other processes' workers.
            seen = RUN_CHANGES.wait(saga_id, seen, min(pause, max(deadline - time.monotonic(), 0.0)))
            pause = min(pause * 2, POLL_MAX_SECONDS)
    finally:
        RUN_CHANGES.unwatch(saga_id)


def run_report(saga_id: uuid.UUID, max_steps: int) -> RunReport:
    """What a run looks like now: node counts, what is in flight, and whether anything will still change.

    Nodes are read in one query, then the saga: a node's change and its saga's change commit together, so the
    saga read is never older than the nodes read, and "settled" cannot be concluded from two mismatched reads.
    """
    nodes = list(Node.objects.filter(saga_id=saga_id).values("id", "key", "status", "next_attempt_at"))
    saga = Saga.objects.get(pk=saga_id)
    now = timezone.now()
    counts = dict(Counter(n["status"] for n in nodes))
    executing = [n for n in nodes if n["status"] == NodeStatus.EXECUTING]
    ready = [n for n in nodes if n["status"] == NodeStatus.READY]
    budget = saga.run_steps_left > 0 and saga.status == SagaStatus.ACTIVE
    settled = not executing and saga.status not in UNSETTLED_SAGA_STATES and not (budget and ready)
    report = RunReport(
        saga=saga,
        steps_started=max_steps - saga.run_steps_left if saga.run_steps_left <= max_steps else 0,
        node_counts=counts,
        in_flight=[{"node_id": str(n["id"]), "key": n["key"], "status": n["status"]} for n in executing],
        settled=settled,
    )
    report.retry_pending = [
        {"node_id": str(n["id"]), "key": n["key"], "next_attempt_at": n["next_attempt_at"].isoformat()}
        for n in ready
        if n["next_attempt_at"] and n["next_attempt_at"] > now
    ]
    report.stopped_because = _why(saga, counts, budget)
    return report


def _why(saga: Saga, counts: dict[str, int], budget: bool) -> str:
    if saga.status != SagaStatus.ACTIVE:
        return f"saga_{saga.status.lower()}"
    if counts.get(NodeStatus.READY) and not budget:
        return "max_steps"
    if counts.get(NodeStatus.WAITING_APPROVAL):
        return "waiting_approval"
    return "no_ready_nodes"
