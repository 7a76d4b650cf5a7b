"""Rollback: unwind a saga by compensating its journaled steps newest-first from their persisted contract snapshots.

The rollback runner holds a fenced lease on the saga row (kept alive by sagas.coordinator.leases.heartbeat while
it runs), so a crashed runner is resumed by the recovery sweep and two runners never compensate one saga.

Invariants (tests/sagas/test_compensation.py, test_versioned_compensation.py):
- a step is compensated with the contract it ran with (its snapshot), never the registry's current version, and a
  snapshot whose hash no longer matches is refused (COMPENSATION_FAILED) without a call;
- COMPENSATED is terminal, and the claim is a compare-and-set, so no step is ever compensated twice;
- one failed compensation never stops the others; the saga ends ROLLBACK_FAILED with every failure listed.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from django.db.models import Q
from django.db.models.functions import Now

from audit import telemetry
from audit.models import EventType as E
from governance.identity.principal import Principal, system_principal
from governance.identity.rbac import EXECUTE, authorize
from registry.actions import InvocationContext
from registry.contracts import (
    backoff_seconds,
    compensation_needs_result,
    definition_hash,
    has_compensation,
    resolved_execution_policy,
)
from registry.templating import references_forward_answer
from sagas import executor
from sagas.coordinator import _policy
from sagas.coordinator._tx import Tx, locked_saga
from sagas.coordinator.leases import LeaseRef, heartbeat, lease_deadline, seconds_from_now, worker_id
from sagas.errors import InvalidTransition
from sagas.models import Node, Saga, Step
from sagas.selectors.scope import parse_uuid
from sagas.states import (
    COMPENSABLE_STEP_STATES,
    NOT_STARTED_NODE_STATES,
    ROLLBACK_REFUSED_STATES,
    NodeStatus,
    SagaStatus,
    StepStatus,
    can_transition,
)

# A compensation backoff is waited for inline, capped so one slow downstream cannot hold a rollback for long.
MAX_COMPENSATION_WAIT_SECONDS = 30.0
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
    """Attempts of this saga executing right now under a live lease (node attempts or an immediate step)."""
    live_node = Q(node__isnull=False, node__status=NodeStatus.EXECUTING, node__lease_expires_at__gt=Now())
    live_immediate = Q(node__isnull=True, lease_expires_at__gt=Now())
    return saga.steps.filter(status=StepStatus.EXECUTING).filter(live_node | live_immediate).count()


def _request(actor: Principal, saga_id: object) -> uuid.UUID:
    with locked_saga(saga_id, actor) as tx:
        saga = tx.saga
        if saga.status in ROLLBACK_REFUSED_STATES:
            raise InvalidTransition(
                "ROLLBACK_REFUSED",
                f"Saga {saga.id} is {saga.status}; a {saga.status.lower().replace('_', ' ')} saga cannot be rolled "
                "back. Nothing was changed."
                + (" Undo committed work with a new saga." if saga.status == SagaStatus.COMMITTED else ""),
            )
        _policy.safety_override(tx, "rollback")
        if saga.status in (SagaStatus.ACTIVE, SagaStatus.RECOVERY_REQUIRED):
            error = {"code": "ROLLBACK_REQUESTED", "message": f"Rollback requested by {actor.principal_id}."}
            tx.transition(saga, SagaStatus.FAILED, event=E.ROLLBACK_REQUESTED, error=error, run_steps_left=0)
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
            tx.transition(node, NodeStatus.BLOCKED, event=E.NODE_BLOCKED, error=error, next_attempt_at=None)
        return fence


def _run(actor: Principal, saga_id: uuid.UUID, fence: int) -> Saga:
    with heartbeat(LeaseRef(Saga, saga_id, fence)):
        for step_id in _pending_steps(saga_id):
            if not _compensate(actor, saga_id, step_id, fence):
                break  # this runner lost its lease; the one that took over finishes the job
        return _finish(actor, saga_id, fence)


def _runner_lost(tx: Tx, fence: int, step: Step | None = None) -> bool:
    if tx.saga.status == SagaStatus.ROLLING_BACK and tx.saga.fence_token == fence:
        return False
    tx.record(E.STALE_WRITE_REFUSED, step=step, status=tx.saga.status, data={"fence_token": fence, "runner": True})
    return True


def _pending_steps(saga_id: uuid.UUID) -> list[uuid.UUID]:
    return list(
        Step.objects.filter(saga_id=saga_id, status__in=COMPENSABLE_STEP_STATES)
        .order_by("-sequence")
        .values_list("id", flat=True)
    )


def _fail(tx: Tx, step: Step, error: dict[str, Any]) -> None:
    if step.status != StepStatus.COMPENSATING:
        tx.transition(step, StepStatus.COMPENSATING, compensation_attempts=step.compensation_attempts)
    tx.transition(step, StepStatus.COMPENSATION_FAILED, event=E.COMPENSATION_FAILED, compensation_error=error)
    _move_node(tx, step, NodeStatus.COMPENSATION_FAILED)


def _move_node(tx: Tx, step: Step, target: str) -> None:
    if step.node_id is None:
        return
    node = Node.objects.get(pk=step.node_id)
    if can_transition("node", node.status, target):
        tx.transition(node, target, lease_owner="", lease_expires_at=None)


def _claim(actor: Principal, saga_id: uuid.UUID, step_id: uuid.UUID, fence: int) -> Step | None:
    """Phase 1 of one compensation: checks, then COMPENSATING with the attempt counted. None = nothing to call."""
    with locked_saga(saga_id, actor) as tx:
        step = Step.objects.get(pk=step_id)
        if _runner_lost(tx, fence, step) or step.status not in COMPENSABLE_STEP_STATES:
            return None
        snapshot = step.action_definition
        if definition_hash(snapshot) != step.action_definition_hash:
            _fail(
                tx,
                step,
                {
                    "code": "DEFINITION_HASH_MISMATCH",
                    "message": "The step's stored contract snapshot does not match its pinned hash; it may have been "
                    "tampered with. Compensation was refused and nothing was called. An operator must investigate.",
                },
            )
            return None
        if not has_compensation(snapshot):
            _no_compensation(tx, step)
            return None
        if _forward_receipt(step) is None and compensation_needs_result(snapshot):
            _no_receipt(tx, step)
            return None
        tx.transition(
            step,
            StepStatus.COMPENSATING,
            event=E.COMPENSATION_STARTED,
            compensation_attempts=step.compensation_attempts + 1,
        )
    return step


def _forward_receipt(step: Step) -> Any:
    """What the compensation templates read as the forward result: the stored result, or, for an uncertain step
    whose answer never arrived, the receipt its action kept (an MCP capture's pre_state) when the compensation
    reads only that pre-state. Restoring a captured prior state is correct whether or not the lost call applied."""
    if step.result is not None:
        return step.result
    receipt = (step.error or {}).get("receipt") if isinstance(step.error, dict) else None
    compensation = step.action_definition.get("compensation", {})
    if (
        step.uncertain_outcome
        and isinstance(receipt, dict)
        and "pre_state" in receipt
        and not references_forward_answer(compensation)
    ):
        return receipt
    return None


def _no_compensation(tx: Tx, step: Step) -> None:
    reversibility = step.action_definition.get("semantic", {}).get("reversibility")
    if reversibility == "read_only" or (
        step.status == StepStatus.FAILED and not step.uncertain_outcome and step.result is None
    ):
        # Nothing in the world to undo: a read, or a failure that produced no effect and no receipt.
        tx.record(E.COMPENSATION_SKIPPED, step=step, status=step.status, data={"reversibility": reversibility})
        return
    _fail(
        tx,
        step,
        {
            "code": "NO_COMPENSATION",
            "message": f"{step.action}@{step.action_version} ({reversibility}) has no compensation, so its effect "
            "remains. An operator must undo it by hand or accept it.",
        },
    )


def _no_receipt(tx: Tx, step: Step) -> None:
    """The compensation addresses what the forward call created (`${result.x}`), and there is no result."""
    if step.status == StepStatus.FAILED and not step.uncertain_outcome:
        # The target refused or failed the call and returned nothing identifiable: nothing was created to undo.
        tx.record(E.COMPENSATION_SKIPPED, step=step, status=step.status, data={"reason": "no_forward_result"})
        return
    _fail(
        tx,
        step,
        {
            "code": "NO_RECEIPT_TO_COMPENSATE",
            "message": f"The outcome of {step.action}@{step.action_version} is unknown and its compensation needs the "
            "forward result, which never arrived. An operator must check the target system for the request with "
            f"idempotency key {step.id} and undo it there if it took effect.",
        },
    )


def _compensate(actor: Principal, saga_id: uuid.UUID, step_id: uuid.UUID, fence: int) -> bool:
    """Compensate one step with retries. False when this runner lost its lease meanwhile."""
    step = _claim(actor, saga_id, step_id, fence)
    while step is not None:
        ctx = InvocationContext(
            saga_id=str(saga_id),
            step_id=str(step.id),
            idempotency_key=f"{step.id}:rollback",
            input=step.input,
            result=_forward_receipt(step),
            attempt=step.compensation_attempts,
        )
        with telemetry.span(
            "saga.compensation", saga_id=str(saga_id), action=step.action, attempt=step.compensation_attempts
        ):
            outcome = executor.perform(step.action_definition, ctx, compensation=True)
        step = _record(actor, saga_id, step, outcome, fence)
    return Saga.objects.filter(pk=saga_id, fence_token=fence, status=SagaStatus.ROLLING_BACK).exists()


def _record(actor: Principal, saga_id: uuid.UUID, step: Step, outcome: executor.Outcome, fence: int) -> Step | None:
    """Phase 3 of one compensation. Returns the step when another attempt should follow."""
    policy = resolved_execution_policy(step.action_definition)["compensation"]
    delay = 0.0
    with locked_saga(saga_id, actor) as tx:
        step.refresh_from_db()
        # A lost lease drops this outcome: the new runner repeats the call with the same `:rollback` key.
        if _runner_lost(tx, fence, step) or step.status != StepStatus.COMPENSATING:
            return None
        telemetry.count(
            "saga.compensations", "Compensation attempts by outcome", outcome="ok" if outcome.ok else "failed"
        )
        if outcome.ok:
            tx.transition(
                step,
                StepStatus.COMPENSATED,
                event=E.COMPENSATION_COMPLETED,
                compensation_result=outcome.result,
                compensation_error=None,
            )
            _move_node(tx, step, NodeStatus.COMPENSATED)
            return None
        error = dict(outcome.error or {})
        if not outcome.retryable or step.compensation_attempts >= int(policy["max_attempts"]):
            _fail(tx, step, {**error, "attempts": step.compensation_attempts})
            return None
        delay = backoff_seconds(policy, step.compensation_attempts, f"{step.id}:rollback")
        tx.update(step, compensation_error=error, compensation_attempts=step.compensation_attempts + 1)
        tx.record(
            E.COMPENSATION_ATTEMPT_FAILED,
            step=step,
            status=StepStatus.COMPENSATING,
            data={"attempt": step.compensation_attempts - 1, "error_code": error.get("code")},
        )
    time.sleep(min(delay, MAX_COMPENSATION_WAIT_SECONDS))
    return step


def _finish(actor: Principal, saga_id: uuid.UUID, fence: int) -> Saga:
    with locked_saga(saga_id, actor) as tx:
        saga = tx.saga
        if _runner_lost(tx, fence):
            return saga
        failed = list(saga.steps.filter(status=StepStatus.COMPENSATION_FAILED).order_by("-sequence"))
        release = {"lease_owner": "", "lease_expires_at": None}
        if not failed:
            tx.transition(saga, SagaStatus.ROLLED_BACK, event=E.ROLLBACK_COMPLETED, next_recovery_at=None, **release)
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
            error=error,
            next_recovery_at=_retry_at(saga, failed),
            **release,
        )
        return saga


def _retry_at(saga: Saga, failed: list[Step]) -> Any:
    """When the sweeper should retry this rollback by itself: only if some failure looks transient."""
    if not any((s.compensation_error or {}).get("retryable") for s in failed):
        return None
    return seconds_from_now(backoff_seconds(RECOVERY_BACKOFF, saga.recovery_attempts + 1, f"{saga.id}:recovery"))
