"""State machines of sagas, workflow nodes and journal steps, as data.

Invariants (pinned by tests/sagas/test_state_tables.py):
- every transition the coordinator performs is listed here, and `coordinator._transition` refuses anything else;
- terminal states are never left (no row in a table starts from one);
- each status string is stable: it is stored, audited and returned to agents.
"""

from __future__ import annotations

from django.db import models


class SagaStatus(models.TextChoices):
    ACTIVE = "ACTIVE"
    COMMITTED = "COMMITTED"
    FAILED = "FAILED"
    ROLLING_BACK = "ROLLING_BACK"
    ROLLED_BACK = "ROLLED_BACK"
    ROLLBACK_FAILED = "ROLLBACK_FAILED"
    RECOVERY_REQUIRED = "RECOVERY_REQUIRED"


class NodeStatus(models.TextChoices):
    WAITING_DEPENDENCY = "WAITING_DEPENDENCY"
    WAITING_APPROVAL = "WAITING_APPROVAL"
    READY = "READY"
    EXECUTING = "EXECUTING"
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"
    REJECTED = "REJECTED"
    BLOCKED = "BLOCKED"
    COMPENSATED = "COMPENSATED"
    COMPENSATION_FAILED = "COMPENSATION_FAILED"
    # Preview sagas only: evaluated as a dry run (everything but the side effect), and never run.
    DRY = "DRY"


class StepStatus(models.TextChoices):
    EXECUTING = "EXECUTING"
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"
    COMPENSATING = "COMPENSATING"
    COMPENSATED = "COMPENSATED"
    COMPENSATION_FAILED = "COMPENSATION_FAILED"
    # Preview sagas only: journaled with its would-be request and verdict; the action was never called.
    DRY = "DRY"


class ApprovalStatus(models.TextChoices):
    PENDING = "PENDING"
    APPROVED = "APPROVED"
    REJECTED = "REJECTED"
    EXPIRED = "EXPIRED"


S, N, T = SagaStatus, NodeStatus, StepStatus

SAGA_TRANSITIONS: dict[str, frozenset[str]] = {
    # FAILED (rollback pending) and RECOVERY_REQUIRED are entered when a step exhausts its retries, FAILED also
    # when a rollback is requested: no new work starts, and the rollback runs once nothing is in flight.
    S.ACTIVE: frozenset({S.COMMITTED, S.FAILED, S.ROLLING_BACK, S.RECOVERY_REQUIRED}),
    # RECOVERY_REQUIRED -> FAILED: a rollback was requested while nodes are still in flight.
    S.RECOVERY_REQUIRED: frozenset({S.ACTIVE, S.FAILED, S.ROLLING_BACK}),
    S.FAILED: frozenset({S.ROLLING_BACK}),
    # ROLLING_BACK -> ROLLING_BACK lets a crashed rollback be resumed.
    S.ROLLING_BACK: frozenset({S.ROLLING_BACK, S.ROLLED_BACK, S.ROLLBACK_FAILED}),
    # An operator retries compensation after fixing the downstream system.
    S.ROLLBACK_FAILED: frozenset({S.ROLLING_BACK}),
    S.COMMITTED: frozenset(),
    S.ROLLED_BACK: frozenset(),
}

NODE_TRANSITIONS: dict[str, frozenset[str]] = {
    # -> DRY only in a preview saga: its dry run evaluates every node that has not run, whatever it waits for.
    N.WAITING_DEPENDENCY: frozenset({N.READY, N.BLOCKED, N.DRY}),
    N.WAITING_APPROVAL: frozenset({N.READY, N.WAITING_DEPENDENCY, N.REJECTED, N.BLOCKED, N.DRY}),
    # READY -> FAILED: refused before any step started (e.g. its pinned contract no longer matches).
    # READY -> WAITING_APPROVAL: policy now requires an approval the node does not have.
    N.READY: frozenset({N.EXECUTING, N.BLOCKED, N.FAILED, N.WAITING_APPROVAL, N.DRY}),
    # EXECUTING -> READY is a scheduled retry (next_attempt_at set); -> FAILED once retries are exhausted.
    N.EXECUTING: frozenset({N.COMPLETED, N.READY, N.FAILED, N.COMPENSATED, N.COMPENSATION_FAILED}),
    N.COMPLETED: frozenset({N.COMPENSATED, N.COMPENSATION_FAILED}),
    N.FAILED: frozenset({N.READY, N.WAITING_DEPENDENCY, N.COMPENSATED, N.COMPENSATION_FAILED}),
    N.REJECTED: frozenset({N.WAITING_APPROVAL, N.BLOCKED}),
    N.BLOCKED: frozenset({N.READY, N.WAITING_DEPENDENCY, N.WAITING_APPROVAL, N.DRY}),
    N.COMPENSATION_FAILED: frozenset({N.COMPENSATED, N.COMPENSATION_FAILED}),
    N.COMPENSATED: frozenset(),
    N.DRY: frozenset(),
}

STEP_TRANSITIONS: dict[str, frozenset[str]] = {
    # EXECUTING -> EXECUTING is the next attempt of the same step (same id, attempts + 1).
    T.EXECUTING: frozenset({T.EXECUTING, T.COMPLETED, T.FAILED, T.COMPENSATING}),
    T.FAILED: frozenset({T.EXECUTING, T.COMPENSATING}),
    T.COMPLETED: frozenset({T.COMPENSATING}),
    # COMPENSATING -> COMPENSATING: a resumed rollback repeats a compensation its crashed runner had started.
    T.COMPENSATING: frozenset({T.COMPENSATING, T.COMPENSATED, T.COMPENSATION_FAILED}),
    T.COMPENSATION_FAILED: frozenset({T.COMPENSATING}),
    T.COMPENSATED: frozenset(),
    # A dry step is created DRY and stays so: nothing ran, so there is nothing to complete or compensate.
    T.DRY: frozenset(),
}

TERMINAL_SAGA = frozenset({S.COMMITTED, S.ROLLED_BACK})
TERMINAL_NODE = frozenset({N.COMPENSATED, N.DRY})
TERMINAL_STEP = frozenset({T.COMPENSATED, T.DRY})

# Forward work (execute, plan, run) needs ACTIVE; approve, retry and checkpoint also work while an operator recovers.
FORWARD_SAGA_STATES = frozenset({S.ACTIVE})
RECOVERABLE_SAGA_STATES = frozenset({S.ACTIVE, S.RECOVERY_REQUIRED})
# Rollback is refused only once the saga is committed or already rolled back.
ROLLBACK_REFUSED_STATES = frozenset({S.COMMITTED, S.ROLLED_BACK})

# Steps that rollback must consider, newest first: anything that may have touched the world and is not undone.
COMPENSABLE_STEP_STATES = frozenset({T.COMPLETED, T.FAILED, T.EXECUTING, T.COMPENSATING, T.COMPENSATION_FAILED})
# Nodes that never started when a saga unwinds end BLOCKED.
NOT_STARTED_NODE_STATES = frozenset({N.WAITING_DEPENDENCY, N.WAITING_APPROVAL, N.READY, N.REJECTED})
# Node retry is offered from these states.
RETRYABLE_NODE_STATES = frozenset({N.FAILED, N.REJECTED, N.BLOCKED})

TABLES: dict[str, dict[str, frozenset[str]]] = {
    "saga": SAGA_TRANSITIONS,
    "node": NODE_TRANSITIONS,
    "step": STEP_TRANSITIONS,
}


def can_transition(kind: str, current: str, target: str) -> bool:
    return target in TABLES[kind].get(current, frozenset())
