"""Immediate steps: run one action now, outside the DAG (`saga_step_execute`), with the three phases of every
attempt (sagas.coordinator.execution.attempts) and the contract's retries waited out inline by the caller.
"""

from __future__ import annotations

import logging
import time
import uuid
from typing import Any

from audit.models import EventType as E
from governance.identity.principal import Principal, system_principal
from governance.identity.rbac import EXECUTE, authorize
from sagas.coordinator import _actions
from sagas.coordinator import _gates as gates
from sagas.coordinator import policy as _policy
from sagas.coordinator._leases import lease_deadline, worker_id
from sagas.coordinator._tx import Refusal, locked_saga
from sagas.coordinator.execution.attempts import Claim, new_step, perform, prior_receipt, record_outcome
from sagas.coordinator.previews import dry_execute
from sagas.coordinator.rollback import saga_rollback
from sagas.errors import ActionFailedPermanent, InvalidTransition, SagaError
from sagas.models import Saga, Step
from sagas.states import SagaStatus, StepStatus

logger = logging.getLogger("sagas.coordinator")

# Immediate steps wait out their backoff inline, bounded the same way per wait.
IMMEDIATE_MAX_BACKOFF_WAIT_SECONDS = 30.0


def saga_step_execute(
    *, actor: Principal, saga_id: object, action: str, input: dict[str, Any], version: str | None = None
) -> Step:
    """Run one action now, outside the DAG. Needs ACTIVE.

    Input is validated before any step exists. The step is journaled EXECUTING, called with its id as idempotency
    key, retried per the contract with the same id, and recorded COMPLETED or FAILED. Exhausted retries apply
    the contract's failure_mode (rollback: compensate the saga now; pause: RECOVERY_REQUIRED) and raise
    ACTION_FAILED_PERMANENT describing what happened. In a preview saga the step is journaled DRY and nothing is
    called. Refusals (kill switch, policy, an approval the action needs) are raised after their evidence commits.
    """
    authorize(actor, EXECUTE, "execute")
    pinned = _actions.resolve(action, version)
    payload = _actions.check_input(pinned, input)
    first = _claim(actor, saga_id, pinned, payload)
    if isinstance(first, Step):
        return first  # a preview saga: journaled DRY, nothing called
    claim: Claim | None = first
    while claim is not None:
        verdict, _ = record_outcome(claim, perform(claim))
        if verdict != "retry":
            break
        waiting = (Step.objects.get(pk=first.step_id).error or {}).get("next_attempt_in_seconds", 0)
        time.sleep(min(float(waiting), IMMEDIATE_MAX_BACKOFF_WAIT_SECONDS))
        claim = _reclaim(claim)
    step = Step.objects.select_related("saga").get(pk=first.step_id)  # answers carry the saga's status too
    if step.status == StepStatus.COMPLETED:
        return step
    return _raise_step_failure(step, first.saga_id)


def _claim(actor: Principal, saga_id: object, pinned: _actions.Pinned, payload: dict[str, Any]) -> Claim | Step:
    """Phase 1 of an immediate step; in a preview saga, the whole dry step (a DRY Step, nothing to call)."""
    with locked_saga(saga_id, actor) as tx:
        if tx.saga.status != SagaStatus.ACTIVE:
            raise InvalidTransition(
                "SAGA_NOT_ACTIVE",
                f"Saga {tx.saga.id} is {tx.saga.status}; executing a step needs ACTIVE. Nothing ran.",
            )
        if tx.saga.preview:
            return dry_execute(tx, pinned, payload)
        if stop := _policy.kill_switch_stop(tx, f"executing {pinned.action}"):
            raise Refusal(stop)
        decision = _policy.decide(tx, "execute", pinned)
        if decision.effect == "deny":
            raise Refusal(_policy.refusal(decision, f"executing {pinned.action}@{pinned.version} immediately"))
        if decision.effect == "require_approval" or pinned.policy["approval_required"]:
            rules = ", ".join(decision.matched_rules)
            source = f"tenant policy rule {rules}" if decision.effect == "require_approval" else "its contract"
            raise Refusal(gates.approval_needed(pinned.action, pinned.version, source))
        step = new_step(tx, pinned, payload, None, 1, lease_owner=worker_id(), lease_expires_at=lease_deadline())
        tx.record(E.STEP_STARTED, step=step, status=StepStatus.EXECUTING, data={"attempt": 1, "worker": worker_id()})
    return Claim(actor, tx.saga.id, step.id, None, 1, 1, pinned, payload)


def _reclaim(claim: Claim) -> Claim | None:
    """Start the next attempt of an immediate step under the same fence, unless the saga moved on meanwhile."""
    with locked_saga(claim.saga_id, claim.actor) as tx:
        step = Step.objects.get(pk=claim.step_id)
        if tx.saga.status != SagaStatus.ACTIVE or step.fence_token != claim.fence or step.status != StepStatus.FAILED:
            return None
        prior = prior_receipt(step)
        tx.transition(
            step,
            StepStatus.EXECUTING,
            attempts=step.attempts + 1,
            error=None,
            lease_owner=worker_id(),
            lease_expires_at=lease_deadline(),
        )
        tx.record(
            E.STEP_STARTED,
            step=step,
            status=StepStatus.EXECUTING,
            data={"attempt": step.attempts, "worker": worker_id()},
        )
    return Claim(
        claim.actor, claim.saga_id, claim.step_id, None, claim.fence, step.attempts, claim.pinned, claim.input, prior
    )


def _raise_step_failure(step: Step, saga_pk: uuid.UUID) -> Step:
    saga = _finish_failed_saga(saga_pk)
    error = step.error or {}
    raise ActionFailedPermanent(
        message=f"Step {step.sequence} ({step.action}@{step.action_version}) failed after {step.attempts} "
        f"attempt(s): {str(error.get('message', error.get('code', 'unknown error'))).rstrip('.')}. "
        + _saga_outcome_sentence(saga),
        step_id=str(step.id),
        saga_status=saga.status,
        error=error,
    )


def _finish_failed_saga(saga_id: uuid.UUID) -> Saga:
    """A FAILED saga (rollback mode) is compensated now, by the coordinator itself."""
    saga = Saga.objects.get(pk=saga_id)
    if saga.status == SagaStatus.FAILED:
        try:
            saga = saga_rollback(actor=system_principal(saga.tenant_id), saga_id=saga.id)
        except SagaError as exc:  # e.g. another run still has work in flight; it will roll back when it drains
            logger.warning("automatic rollback deferred saga_id=%s code=%s", saga.id, exc.code)
            saga.refresh_from_db()
    return saga


def _saga_outcome_sentence(saga: Saga) -> str:
    return {
        SagaStatus.ROLLED_BACK: "The saga was rolled back: every earlier step was compensated. Begin a new saga "
        "to try again.",
        SagaStatus.ROLLBACK_FAILED: "The saga was rolled back but some compensation failed (ROLLBACK_FAILED); "
        "get_saga shows which. An operator must reconcile them, then call rollback_saga again.",
        SagaStatus.RECOVERY_REQUIRED: "The saga is paused in RECOVERY_REQUIRED (failure_mode pause): nothing was "
        "compensated. Reconcile, then retry the node (force=true if its outcome is uncertain) or roll back.",
        SagaStatus.FAILED: "The saga FAILED; its rollback starts automatically as soon as the work still in "
        "flight finishes (get_saga shows progress).",
    }.get(SagaStatus(saga.status), f"The saga is {saga.status}.")
