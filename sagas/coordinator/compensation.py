"""One compensation of a journaled step, as the rollback runner (sagas.coordinator.rollback) and the undo walk of a
proxy session (sagas.coordinator._undo_walk) run it: claim the step (COMPENSATING, the attempt counted), call its
compensation from the persisted snapshot with the stable `<step id>:rollback` key outside any transaction, record the
outcome, retrying transient failures with the contract's backoff. Every write checks the runner's fence first.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from audit import telemetry
from audit.models import EventType as E
from governance.identity.principal import Principal
from registry.actions import InvocationContext
from registry.contracts import (
    backoff_seconds,
    compensation_needs_result,
    definition_hash,
    has_compensation,
    resolved_execution_policy,
)
from sagas import executor
from sagas.coordinator._leases import RELEASED
from sagas.coordinator._tx import Tx, locked_saga
from sagas.models import Node, Saga, Step
from sagas.selectors.undo_plan import forward_receipt, step_contract
from sagas.states import COMPENSABLE_STEP_STATES, NodeStatus, SagaStatus, StepStatus, can_transition

# A compensation backoff is waited for inline, capped so one slow downstream cannot hold a rollback for long.
MAX_COMPENSATION_WAIT_SECONDS = 30.0


def runner_lost(tx: Tx, fence: int, step: Step | None = None) -> bool:
    if tx.saga.status == SagaStatus.ROLLING_BACK and tx.saga.fence_token == fence:
        return False
    tx.record(E.STALE_WRITE_REFUSED, step=step, status=tx.saga.status, data={"fence_token": fence, "runner": True})
    return True


def fail(tx: Tx, step: Step, error: dict[str, Any]) -> None:
    if step.status != StepStatus.COMPENSATING:
        tx.transition(step, StepStatus.COMPENSATING, compensation_attempts=step.compensation_attempts)
    tx.transition(step, StepStatus.COMPENSATION_FAILED, event=E.COMPENSATION_FAILED, compensation_error=error)
    _move_node(tx, step, NodeStatus.COMPENSATION_FAILED)


def _move_node(tx: Tx, step: Step, target: str) -> None:
    if step.node_id is None:
        return
    node = Node.objects.get(pk=step.node_id)
    if can_transition("node", node.status, target):
        tx.transition(node, target, **RELEASED)


def _claim(actor: Principal, saga_id: uuid.UUID, step_id: uuid.UUID, fence: int) -> Step | None:
    """Phase 1 of one compensation: checks, then COMPENSATING with the attempt counted. None = nothing to call."""
    with locked_saga(saga_id, actor) as tx:
        step = Step.objects.get(pk=step_id)
        if runner_lost(tx, fence, step) or step.status not in COMPENSABLE_STEP_STATES:
            return None
        snapshot = step.action_definition
        if definition_hash(snapshot) != step.action_definition_hash:
            fail(
                tx,
                step,
                {
                    "code": "DEFINITION_HASH_MISMATCH",
                    "message": "The step's stored contract snapshot does not match its pinned hash; it may have been "
                    "tampered with. Compensation was refused and nothing was called. An operator must investigate.",
                },
            )
            return None
        effective = step_contract(step)  # the inverse its capture's recorded outcome chose
        if not has_compensation(effective):
            _no_compensation(tx, step)
            return None
        if forward_receipt(step) is None and compensation_needs_result(effective):
            _no_receipt(tx, step)
            return None
        tx.transition(
            step,
            StepStatus.COMPENSATING,
            event=E.COMPENSATION_STARTED,
            compensation_attempts=step.compensation_attempts + 1,
        )
    return step


def _no_compensation(tx: Tx, step: Step) -> None:
    reversibility = step.action_definition.get("semantic", {}).get("reversibility")
    if reversibility == "read_only" or (
        step.status == StepStatus.FAILED and not step.uncertain_outcome and step.result is None
    ):
        # Nothing in the world to undo: a read, or a failure that produced no effect and no receipt.
        tx.record(E.COMPENSATION_SKIPPED, step=step, status=step.status, data={"reversibility": reversibility})
        return
    fail(
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
    fail(
        tx,
        step,
        {
            "code": "NO_RECEIPT_TO_COMPENSATE",
            "message": f"The outcome of {step.action}@{step.action_version} is unknown and its compensation needs the "
            "forward result, which never arrived. An operator must check the target system for the request with "
            f"idempotency key {step.id} and undo it there if it took effect.",
        },
    )


def compensate(actor: Principal, saga_id: uuid.UUID, step_id: uuid.UUID, fence: int) -> bool:
    """Compensate one step with retries. False when this runner lost its lease meanwhile."""
    step = _claim(actor, saga_id, step_id, fence)
    while step is not None:
        ctx = InvocationContext(
            saga_id=str(saga_id),
            step_id=str(step.id),
            idempotency_key=f"{step.id}:rollback",
            input=step.input,
            result=forward_receipt(step),
            attempt=step.compensation_attempts,
        )
        with telemetry.span(
            "saga.compensation", saga_id=str(saga_id), action=step.action, attempt=step.compensation_attempts
        ):
            outcome = executor.perform(step_contract(step), ctx, compensation=True)
        step = _record(actor, saga_id, step, outcome, fence)
    return Saga.objects.filter(pk=saga_id, fence_token=fence, status=SagaStatus.ROLLING_BACK).exists()


def _record(actor: Principal, saga_id: uuid.UUID, step: Step, outcome: executor.Outcome, fence: int) -> Step | None:
    """Phase 3 of one compensation. Returns the step when another attempt should follow."""
    policy = resolved_execution_policy(step.action_definition)["compensation"]
    delay = 0.0
    with locked_saga(saga_id, actor) as tx:
        step.refresh_from_db()
        # A lost lease drops this outcome: the new runner repeats the call with the same `:rollback` key.
        if runner_lost(tx, fence, step) or step.status != StepStatus.COMPENSATING:
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
            fail(tx, step, {**error, "attempts": step.compensation_attempts})
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
