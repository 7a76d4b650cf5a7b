"""Rollback: unwind a saga by compensating its journaled steps newest-first from their persisted contract snapshots.

The rollback runner holds a fenced lease on the saga row (kept alive by sagas.coordinator._leases.heartbeat while
it runs), so a crashed runner is resumed by the recovery sweep and two runners never compensate one saga.

Invariants (tests/sagas/test_compensation.py, test_versioned_compensation.py):
- a step is compensated with the contract it ran with (its snapshot), never the registry's current version, and a
  snapshot whose hash no longer matches is refused (COMPENSATION_FAILED) without a call;
- COMPENSATED is terminal, and the claim is a compare-and-set, so no step is ever compensated twice;
- one failed compensation never stops the others; the saga ends ROLLBACK_FAILED with every failure listed.

One step's compensation (claim, call, record) is sagas.coordinator.compensation. A proxy session is unwound by its
undo walk instead (sagas.coordinator._undo_walk, chosen in `_run`), whoever runs the rollback: C and I calls listed,
not failed, the drift check, the first failure stopping the walk, the options its undo recorded
(tests/proxy/test_undo_resume.py).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any

from django.db.models import Q
from django.db.models.functions import Now
from django.utils import timezone

from audit import telemetry
from audit.models import EventType as E
from governance.identity.principal import Principal, system_principal
from governance.identity.rbac import EXECUTE, authorize
from registry.contracts import backoff_seconds
from sagas.coordinator import _undo_walk, policy
from sagas.coordinator._deciders import not_the_sessions
from sagas.coordinator._leases import RELEASED, LeaseRef, heartbeat, lease_deadline, seconds_from_now, worker_id
from sagas.coordinator._tx import Tx, locked_saga
from sagas.coordinator.compensation import compensate, runner_lost
from sagas.errors import InvalidTransition
from sagas.models import Node, ProxyCallIntent, Saga, Step
from sagas.selectors.scope import parse_uuid
from sagas.states import (
    COMPENSABLE_STEP_STATES,
    NOT_STARTED_NODE_STATES,
    ROLLBACK_REFUSED_STATES,
    ApprovalStatus,
    NodeStatus,
    SagaKind,
    SagaStatus,
    StepStatus,
)

# How long a rollback request waits for attempts in flight to finish; past that it returns with the saga FAILED
# (rollback pending), and the rollback starts as soon as the last attempt records its outcome.
DEFAULT_ROLLBACK_WAIT_SECONDS = 60.0
DRAIN_POLL_SECONDS = 0.05
# Automatic retries of a ROLLBACK_FAILED saga whose failures look transient: 30 s, doubling, at most hourly.
RECOVERY_BACKOFF = {"initial_backoff_seconds": 30, "backoff_multiplier": 2, "max_backoff_seconds": 3600, "jitter": 0.1}
RESUMABLE_STATES = frozenset({SagaStatus.FAILED, SagaStatus.ROLLING_BACK, SagaStatus.ROLLBACK_FAILED})


def saga_rollback(*, actor: Principal, saga_id: object, wait_seconds: float | None = None) -> Saga:
    """Unwind a saga. Refused only for COMMITTED and ROLLED_BACK.

    Effects: an ACTIVE or RECOVERY_REQUIRED saga first becomes FAILED (audit ROLLBACK_REQUESTED; its run stops,
    so no new attempt starts); once no attempt is in flight it becomes ROLLING_BACK under a fenced runner lease
    (audit ROLLBACK_STARTED); nodes that never started become BLOCKED; every COMPLETED, FAILED, uncertain or
    previously failed compensation step is compensated newest-first; the saga ends ROLLED_BACK (audit
    ROLLBACK_COMPLETED) or ROLLBACK_FAILED (audit ROLLBACK_FAILED, `error.failures` lists each step). Calling it
    again on ROLLBACK_FAILED retries the failed compensations only. Waits up to `wait_seconds` (default 60) for
    attempts in flight, or for another runner, then returns the saga as it is.
    """
    authorize(actor, EXECUTE, "rollback")
    deadline = time.monotonic() + (DEFAULT_ROLLBACK_WAIT_SECONDS if wait_seconds is None else max(0.0, wait_seconds))
    pk = _request(actor, saga_id)
    while True:
        fence = _start(actor, pk)
        if fence is not None:
            return _run(actor, pk, fence)
        saga = Saga.objects.get(pk=pk)
        if saga.status not in RESUMABLE_STATES or time.monotonic() >= deadline:
            return saga
        time.sleep(DRAIN_POLL_SECONDS)


def saga_rollback_resume(*, saga_id: object, trace: dict[str, str] | None = None) -> Saga | None:
    """Start or resume a pending rollback as the coordinator (worker, sweeper). Does nothing if another runner
    holds a live lease, attempts are still in flight, or the saga needs no rollback."""
    pk = parse_uuid(saga_id)
    saga = Saga.objects.filter(pk=pk).first() if pk else None
    if saga is None or saga.status not in RESUMABLE_STATES:
        return saga
    actor = system_principal(saga.tenant_id)
    with telemetry.attached(trace), telemetry.span("saga.rollback", saga_id=str(saga.id)):
        fence = _start(actor, saga.id)
        return _run(actor, saga.id, fence) if fence is not None else saga


def in_flight(saga: Saga) -> int:
    """Attempts of this saga executing right now under a live lease (node attempts or an immediate step, and a
    proxied call sent on its intent whose step is not written yet)."""
    live_node = Q(node__isnull=False, node__status=NodeStatus.EXECUTING, node__lease_expires_at__gt=Now())
    live_immediate = Q(node__isnull=True, lease_expires_at__gt=Now())
    steps = saga.steps.filter(status=StepStatus.EXECUTING).filter(live_node | live_immediate).count()
    if not saga.is_proxy_session:
        return steps
    return steps + ProxyCallIntent.objects.filter(saga=saga, lease_expires_at__gt=Now()).count()


def _request(actor: Principal, saga_id: object, note: Callable[[Tx], None] | None = None) -> uuid.UUID:
    """Refuse or accept the rollback (ACTIVE/RECOVERY_REQUIRED -> FAILED); `note` records, in the same transaction,
    what the caller asked for (the undo of a proxy session records its options)."""
    with locked_saga(saga_id, actor) as tx:
        saga = tx.saga
        if saga.status in ROLLBACK_REFUSED_STATES:
            raise InvalidTransition(
                "ROLLBACK_REFUSED",
                f"Saga {saga.id} is {saga.status}; a {saga.status.lower().replace('_', ' ')} saga cannot be rolled "
                "back. Nothing was changed."
                + (" Undo committed work with a new saga." if saga.status == SagaStatus.COMMITTED else ""),
            )
        if saga.kind == SagaKind.PROXY_SESSION and (
            refused := not_the_sessions(actor, saga.creator_principal_id, str(saga.id))
        ):
            raise refused
        policy.safety_override(tx, "rollback")
        if saga.status in (SagaStatus.ACTIVE, SagaStatus.RECOVERY_REQUIRED):
            # A rollback asked for is no error: the saga keeps the error it had (none, or what made it wait for an
            # operator), as semantic-saga-mcp kept it; the ROLLBACK_REQUESTED event says who asked.
            tx.transition(saga, SagaStatus.FAILED, event=E.ROLLBACK_REQUESTED, run_steps_left=0)
        if note is not None:
            note(tx)
        return saga.id


def _start(actor: Principal, saga_id: uuid.UUID) -> int | None:
    """Take the rollback runner lease (fence + 1), or None when someone else must go first."""
    with locked_saga(saga_id, actor) as tx:
        saga = tx.saga
        if saga.status not in RESUMABLE_STATES or in_flight(saga):
            return None
        live_runner = Saga.objects.filter(pk=saga.pk, lease_expires_at__gt=Now()).exists()
        if saga.status == SagaStatus.ROLLING_BACK and live_runner:
            return None
        fence = saga.fence_token + 1
        resumed = saga.status == SagaStatus.ROLLING_BACK
        tx.transition(
            saga,
            SagaStatus.ROLLING_BACK,
            event=E.ROLLBACK_RESUMED if resumed else E.ROLLBACK_STARTED,
            fence_token=fence,
            lease_owner=worker_id(),
            lease_expires_at=lease_deadline(),
            run_steps_left=0,
        )
        for node in Node.objects.filter(saga=saga, status__in=NOT_STARTED_NODE_STATES).order_by("pk"):
            error = {"code": "SAGA_ROLLED_BACK", "message": "The saga was rolled back before this node ran."}
            _close_pending_approvals(tx, node)
            tx.transition(node, NodeStatus.BLOCKED, event=E.NODE_BLOCKED, error=error, next_attempt_at=None)
        return fence


def _close_pending_approvals(tx: Tx, node: Node) -> None:
    """A request nobody decided before the saga was rolled back is closed with it (REJECTED by the system, saying
    why), so no approval list keeps showing it as pending and no late decision can apply to it."""
    for approval in node.approvals.filter(status=ApprovalStatus.PENDING):
        tx.transition(
            approval,
            ApprovalStatus.REJECTED,
            event=E.APPROVAL_REJECTED,
            decided_by="system:rollback",
            reason="the saga was rolled back (for a proxy session: undone) before anyone decided it",
            decided_at=timezone.now(),
        )


def _run(actor: Principal, saga_id: uuid.UUID, fence: int) -> Saga:
    with heartbeat(LeaseRef(Saga, saga_id, fence)):
        if _undo_walk.is_session(saga_id):
            # A proxy session unwinds as its undo does, whoever runs it (a resumed runner, the sweeper's retry, the
            # console): C and I calls listed rather than failed, the drift check, the options the undo recorded.
            _undo_walk.walk(actor, saga_id, fence, _undo_walk.recorded_options(saga_id))
        else:
            for step_id in _pending_steps(saga_id):
                if not compensate(actor, saga_id, step_id, fence):
                    break  # this runner lost its lease; the one that took over finishes the job
        return _finish(actor, saga_id, fence)


def _pending_steps(saga_id: uuid.UUID) -> list[uuid.UUID]:
    return list(
        Step.objects.filter(saga_id=saga_id, status__in=COMPENSABLE_STEP_STATES)
        .order_by("-sequence")
        .values_list("id", flat=True)
    )


def _finish(actor: Principal, saga_id: uuid.UUID, fence: int) -> Saga:
    with locked_saga(saga_id, actor) as tx:
        saga = tx.saga
        if runner_lost(tx, fence):
            return saga
        failed = list(saga.steps.filter(status=StepStatus.COMPENSATION_FAILED).order_by("-sequence"))
        release = {"lease_owner": "", "lease_expires_at": None}
        if not failed:
            # An undone session shows no error: what its undo left is its residue (sagas.selectors.undo_outcome),
            # not a failure.
            cleared = {"error": None} if saga.kind == SagaKind.PROXY_SESSION else {}
            tx.transition(
                saga,
                SagaStatus.ROLLED_BACK,
                event=E.ROLLBACK_COMPLETED,
                event_data=_counts(saga, failed=0),
                next_recovery_at=None,
                **release,
                **cleared,
            )
            return saga
        failures = [
            {"step_id": str(s.id), "sequence": s.sequence, "action": s.action, "error": s.compensation_error}
            for s in failed
        ]
        error = {
            "code": "ROLLBACK_FAILED",
            "message": f"{len(failed)} compensation(s) failed; their effects may remain. Reconcile each listed step, "
            "then call rollback_saga again to retry only the failed ones.",
            "failures": failures,
        }
        tx.transition(
            saga,
            SagaStatus.ROLLBACK_FAILED,
            event=E.ROLLBACK_FAILED,
            event_data=_counts(saga, failed=len(failed)),
            error=error,
            next_recovery_at=_retry_at(saga, failed),
            **release,
        )
        return saga


def _counts(saga: Saga, *, failed: int) -> dict[str, int]:
    """The rollback's tally, as semantic-saga-mcp's ROLLBACK_COMPLETED / ROLLBACK_FAILED carry it."""
    return {"compensated_steps": saga.steps.filter(status=StepStatus.COMPENSATED).count(), "failed_steps": failed}


def _pause(actor: Principal, saga_id: uuid.UUID, fence: int) -> Saga:
    """Let go of the runner's lease without finishing: the walk was asked to stop between two calls. The saga stays
    ROLLING_BACK; the next rollback or undo (or the recovery sweep) resumes it at once."""
    with locked_saga(saga_id, actor) as tx:
        if not runner_lost(tx, fence):
            tx.update(tx.saga, **RELEASED)
        return tx.saga


def _retry_at(saga: Saga, failed: list[Step]) -> Any:
    """When the sweeper should retry this rollback by itself: only if some failure looks transient."""
    if not any((s.compensation_error or {}).get("retryable") for s in failed):
        return None
    return seconds_from_now(backoff_seconds(RECOVERY_BACKOFF, saga.recovery_attempts + 1, f"{saga.id}:recovery"))
