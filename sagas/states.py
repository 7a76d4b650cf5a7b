"""State machines of sagas, workflow nodes, journal steps and approvals, as data.

Invariants:
- every transition the coordinator performs is listed here, and the one guarded transition
  (`sagas.coordinator._tx.Tx.transition`) refuses anything else (tests/sagas/test_guarded_transition.py);
- the tables are the state machines docs/architecture.md section 3 documents, terminal states are never left (no
  row in a table starts from one) and every status is reachable (tests/sagas/test_state_tables.py);
- each status string is stable: it is stored, audited and returned to agents.
"""

from __future__ import annotations

from django.db import models


class SagaKind(models.TextChoices):
    """What a saga is. Set by the server when the saga begins, never by a caller: a proxy session is opened only by
    the MCP proxy (sagas.coordinator.proxy.calls.proxy_session_open), and its rollback is the proxy's undo walk."""

    SAGA = "saga"
    PROXY_SESSION = "proxy_session"


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
    # Proxied calls only: journaled and refused by a gate, policy, the kill switch or a person; never sent.
    REFUSED = "REFUSED"


class ApprovalStatus(models.TextChoices):
    PENDING = "PENDING"
    APPROVED = "APPROVED"
    REJECTED = "REJECTED"
    EXPIRED = "EXPIRED"


SAGA_TRANSITIONS: dict[str, frozenset[str]] = {
    # FAILED (rollback pending) and RECOVERY_REQUIRED are entered when a step exhausts its retries, FAILED also
    # when a rollback is requested: no new work starts, and the rollback runs (FAILED -> ROLLING_BACK) once
    # nothing is in flight.
    SagaStatus.ACTIVE: frozenset({SagaStatus.COMMITTED, SagaStatus.FAILED, SagaStatus.RECOVERY_REQUIRED}),
    # RECOVERY_REQUIRED -> ACTIVE: a retry resumes the saga; -> FAILED: a rollback was requested.
    SagaStatus.RECOVERY_REQUIRED: frozenset({SagaStatus.ACTIVE, SagaStatus.FAILED}),
    SagaStatus.FAILED: frozenset({SagaStatus.ROLLING_BACK}),
    # ROLLING_BACK -> ROLLING_BACK lets a crashed rollback be resumed.
    SagaStatus.ROLLING_BACK: frozenset({SagaStatus.ROLLING_BACK, SagaStatus.ROLLED_BACK, SagaStatus.ROLLBACK_FAILED}),
    # An operator retries compensation after fixing the downstream system.
    SagaStatus.ROLLBACK_FAILED: frozenset({SagaStatus.ROLLING_BACK}),
    SagaStatus.COMMITTED: frozenset(),
    SagaStatus.ROLLED_BACK: frozenset(),
}

NODE_TRANSITIONS: dict[str, frozenset[str]] = {
    # -> DRY only in a preview saga: its dry run evaluates every node that has not run, whatever it waits for.
    # -> WAITING_APPROVAL: a gated node's dependencies completed; only now is its approval pending.
    NodeStatus.WAITING_DEPENDENCY: frozenset(
        {NodeStatus.READY, NodeStatus.WAITING_APPROVAL, NodeStatus.BLOCKED, NodeStatus.DRY}
    ),
    NodeStatus.WAITING_APPROVAL: frozenset(
        {NodeStatus.READY, NodeStatus.WAITING_DEPENDENCY, NodeStatus.REJECTED, NodeStatus.BLOCKED, NodeStatus.DRY}
    ),
    # READY -> FAILED: refused before any step started (e.g. its pinned contract no longer matches).
    # READY -> WAITING_APPROVAL: policy now requires an approval the node does not have.
    NodeStatus.READY: frozenset(
        {NodeStatus.EXECUTING, NodeStatus.BLOCKED, NodeStatus.FAILED, NodeStatus.WAITING_APPROVAL, NodeStatus.DRY}
    ),
    # EXECUTING -> READY is a scheduled retry (next_attempt_at set); -> FAILED once retries are exhausted.
    NodeStatus.EXECUTING: frozenset(
        {
            NodeStatus.COMPLETED,
            NodeStatus.READY,
            NodeStatus.FAILED,
            NodeStatus.COMPENSATED,
            NodeStatus.COMPENSATION_FAILED,
        }
    ),
    NodeStatus.COMPLETED: frozenset({NodeStatus.COMPENSATED, NodeStatus.COMPENSATION_FAILED}),
    NodeStatus.FAILED: frozenset(
        {NodeStatus.READY, NodeStatus.WAITING_DEPENDENCY, NodeStatus.COMPENSATED, NodeStatus.COMPENSATION_FAILED}
    ),
    NodeStatus.REJECTED: frozenset({NodeStatus.WAITING_APPROVAL, NodeStatus.BLOCKED}),
    NodeStatus.BLOCKED: frozenset(
        {NodeStatus.READY, NodeStatus.WAITING_DEPENDENCY, NodeStatus.WAITING_APPROVAL, NodeStatus.DRY}
    ),
    NodeStatus.COMPENSATION_FAILED: frozenset({NodeStatus.COMPENSATED, NodeStatus.COMPENSATION_FAILED}),
    NodeStatus.COMPENSATED: frozenset(),
    NodeStatus.DRY: frozenset(),
}

STEP_TRANSITIONS: dict[str, frozenset[str]] = {
    # EXECUTING -> EXECUTING is the next attempt of the same step (same id, attempts + 1).
    StepStatus.EXECUTING: frozenset(
        {StepStatus.EXECUTING, StepStatus.COMPLETED, StepStatus.FAILED, StepStatus.COMPENSATING}
    ),
    StepStatus.FAILED: frozenset({StepStatus.EXECUTING, StepStatus.COMPENSATING}),
    StepStatus.COMPLETED: frozenset({StepStatus.COMPENSATING}),
    # COMPENSATING -> COMPENSATING: a resumed rollback repeats a compensation its crashed runner had started.
    StepStatus.COMPENSATING: frozenset(
        {StepStatus.COMPENSATING, StepStatus.COMPENSATED, StepStatus.COMPENSATION_FAILED}
    ),
    StepStatus.COMPENSATION_FAILED: frozenset({StepStatus.COMPENSATING}),
    StepStatus.COMPENSATED: frozenset(),
    # A dry step is created DRY and stays so: nothing ran, so there is nothing to complete or compensate.
    StepStatus.DRY: frozenset(),
    # A refused proxied call is created REFUSED and stays so: it was never sent.
    StepStatus.REFUSED: frozenset(),
}

APPROVAL_TRANSITIONS: dict[str, frozenset[str]] = {
    # A request is decided once: approved, rejected, or expired (an approval attempted after expires_at).
    ApprovalStatus.PENDING: frozenset({ApprovalStatus.APPROVED, ApprovalStatus.REJECTED, ApprovalStatus.EXPIRED}),
    ApprovalStatus.APPROVED: frozenset(),
    ApprovalStatus.REJECTED: frozenset(),
    ApprovalStatus.EXPIRED: frozenset(),
}

TERMINAL_SAGA = frozenset({SagaStatus.COMMITTED, SagaStatus.ROLLED_BACK})
TERMINAL_NODE = frozenset({NodeStatus.COMPENSATED, NodeStatus.DRY})
TERMINAL_STEP = frozenset({StepStatus.COMPENSATED, StepStatus.DRY, StepStatus.REFUSED})
TERMINAL_APPROVAL = frozenset({ApprovalStatus.APPROVED, ApprovalStatus.REJECTED, ApprovalStatus.EXPIRED})

# Forward work (execute, plan, run) needs ACTIVE; approve, retry and checkpoint also work while an operator recovers.
FORWARD_SAGA_STATES = frozenset({SagaStatus.ACTIVE})
RECOVERABLE_SAGA_STATES = frozenset({SagaStatus.ACTIVE, SagaStatus.RECOVERY_REQUIRED})
# Rollback is refused only once the saga is committed or already rolled back.
ROLLBACK_REFUSED_STATES = frozenset({SagaStatus.COMMITTED, SagaStatus.ROLLED_BACK})

# Steps that rollback must consider, newest first: anything that may have touched the world and is not undone.
COMPENSABLE_STEP_STATES = frozenset(
    {
        StepStatus.COMPLETED,
        StepStatus.FAILED,
        StepStatus.EXECUTING,
        StepStatus.COMPENSATING,
        StepStatus.COMPENSATION_FAILED,
    }
)
# Nodes that never started when a saga unwinds end BLOCKED.
NOT_STARTED_NODE_STATES = frozenset(
    {NodeStatus.WAITING_DEPENDENCY, NodeStatus.WAITING_APPROVAL, NodeStatus.READY, NodeStatus.REJECTED}
)
# Node retry is offered from these states.
RETRYABLE_NODE_STATES = frozenset({NodeStatus.FAILED, NodeStatus.REJECTED, NodeStatus.BLOCKED})

TABLES: dict[str, dict[str, frozenset[str]]] = {
    "saga": SAGA_TRANSITIONS,
    "node": NODE_TRANSITIONS,
    "step": STEP_TRANSITIONS,
    "approval": APPROVAL_TRANSITIONS,
}


def can_transition(kind: str, current: str, target: str) -> bool:
    return target in TABLES[kind].get(current, frozenset())
