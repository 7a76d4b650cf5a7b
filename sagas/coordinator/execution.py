"""Executing work: immediate steps and ready DAG nodes (DESIGN.md section 5).

Each attempt is three phases: (1) a short transaction that re-checks the saga, the pinned contract, approval and
input, takes the lease (fence + 1) and writes the step as EXECUTING (write-ahead); (2) the call, outside any
transaction, with the step id as idempotency key and a heartbeat on the lease; (3) a short transaction that
records the outcome only if the fence still matches. Retries reuse the step id.
"""

from __future__ import annotations

import logging
import time
import uuid
from concurrent.futures import FIRST_COMPLETED, Future, wait
from dataclasses import dataclass, field
from datetime import timedelta
from functools import partial
from typing import Any

from django.db.models import Min, Q
from django.utils import timezone

from audit.models import EventType as E
from governance.identity import Principal, system_principal
from registry.actions import InvocationContext
from registry.contracts import backoff_seconds
from sagas import executor
from sagas.coordinator import _actions, _graph
from sagas.coordinator._tx import Tx, locked_saga
from sagas.coordinator.compensation import saga_rollback
from sagas.errors import ActionFailedPermanent, InvalidInput, InvalidTransition, SagaError
from sagas.leases import LeaseRef, lease_deadline, worker_id
from sagas.models import Node, Saga, Step
from sagas.states import ApprovalStatus, SagaStatus
from sagas.states import NodeStatus as N
from sagas.states import StepStatus as T

logger = logging.getLogger("sagas.coordinator")

# A run waits in-process for a scheduled retry at most this long; a longer backoff returns to the caller, whose
# next run_ready_steps picks the node up once it is due.
RUN_MAX_RETRY_WAIT_SECONDS = 30.0
# Immediate steps wait out their backoff inline, bounded the same way per wait.
IMMEDIATE_MAX_BACKOFF_WAIT_SECONDS = 30.0


@dataclass(frozen=True)
class Claim:
    """An attempt this process owns: what to call, and the fence that proves ownership when recording."""

    actor: Principal
    saga_id: uuid.UUID
    step_id: uuid.UUID
    node_id: uuid.UUID | None
    fence: int
    attempt: int
    pinned: _actions.Pinned
    input: dict[str, Any]

    def context(self) -> InvocationContext:
        return InvocationContext(
            saga_id=str(self.saga_id),
            step_id=str(self.step_id),
            idempotency_key=str(self.step_id),
            input=self.input,
            attempt=self.attempt,
        )

    def lease(self) -> LeaseRef:
        return LeaseRef(Node if self.node_id else Saga, self.node_id or self.saga_id, self.fence)


@dataclass
class RunReport:
    saga: Saga
    started: int = 0
    completed: int = 0
    retries_scheduled: int = 0
    failed: int = 0
    stale: int = 0
    stopped_because: str = "no_ready_nodes"
    details: list[dict[str, Any]] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "started": self.started,
            "completed": self.completed,
            "retries_scheduled": self.retries_scheduled,
            "failed": self.failed,
            "stale_writes_refused": self.stale,
            "stopped_because": self.stopped_because,
        }


# --- phase 1: claim ---------------------------------------------------------------------------------------------


def _new_step(tx: Tx, pinned: _actions.Pinned, payload: dict[str, Any], node: Node | None, fence: int) -> Step:
    step = Step(
        saga=tx.saga,
        sequence=tx.saga.next_sequence,
        node=node,
        action=pinned.action,
        action_version=pinned.version,
        action_definition_hash=pinned.definition_hash,
        action_definition=pinned.definition,
        input=payload,
        status=T.EXECUTING,
        attempts=1,
        fence_token=fence,
    )
    step.save(force_insert=True)
    tx.update(tx.saga, next_sequence=tx.saga.next_sequence + 1)
    return step


def _check_approval(node: Node) -> None:
    if not node.approval_required:
        return
    approval = node.approvals.filter(status=ApprovalStatus.APPROVED).order_by("-decided_at").first()
    digest = _actions.input_digest(node.input)
    if approval is None or approval.definition_hash != node.action_definition_hash or approval.input_digest != digest:
        raise SagaError(
            "APPROVAL_NOT_BINDING",
            f"Node {node.key or node.id} has no approval bound to its current contract and input. Nothing ran. "
            "Retry the node to request a fresh approval.",
        )


def _claim_node(tx: Tx, node: Node) -> Claim | None:
    try:
        pinned = _actions.pinned_version(node.action, node.action_version, node.action_definition_hash)
        _check_approval(node)
        payload = _actions.check_input(pinned, node.input)
    except SagaError as refusal:
        tx.transition(node, N.FAILED, event=E.NODE_FAILED, error=refusal.as_dict())
        _graph.block_dependants(tx, node, f"dependency refused before start: {refusal.code}")
        _apply_failure_mode(tx, _failure_mode_of(node), refusal.as_dict())
        return None
    fence = node.fence_token + 1
    step = node.step
    if step is None:
        step = _new_step(tx, pinned, payload, node, fence)
    else:
        tx.transition(step, T.EXECUTING, attempts=step.attempts + 1, fence_token=fence, error=None)
    tx.transition(
        node,
        N.EXECUTING,
        attempts=node.attempts + 1,
        fence_token=fence,
        lease_owner=worker_id(),
        lease_expires_at=lease_deadline(),
        step=step,
        next_attempt_at=None,
    )
    tx.record(E.STEP_STARTED, node=node, step=step, status=T.EXECUTING, data={"attempt": node.attempts})
    return Claim(tx.actor, tx.saga.id, step.id, node.id, fence, node.attempts, pinned, payload)


def _failure_mode_of(node: Node) -> str:
    try:
        return str(_actions.resolve(node.action, node.action_version).policy["failure_mode"])
    except SagaError:
        return "pause"  # without a readable contract, guessing "rollback" could unwind work nobody can verify


def _claim_ready(actor: Principal, saga_id: object, limit: int) -> list[Claim]:
    with locked_saga(saga_id, actor) as tx:
        if tx.saga.status != SagaStatus.ACTIVE or limit <= 0:
            return []
        due = Q(next_attempt_at__isnull=True) | Q(next_attempt_at__lte=timezone.now())
        nodes = Node.objects.filter(saga=tx.saga, status=N.READY).filter(due).select_related("step")
        claims = [_claim_node(tx, node) for node in nodes.order_by("position")[:limit]]
    return [c for c in claims if c is not None]


# --- phase 3: record ----------------------------------------------------------------------------------------------


def _apply_failure_mode(tx: Tx, failure_mode: str, error: dict[str, Any]) -> None:
    if tx.saga.status != SagaStatus.ACTIVE:
        return
    if failure_mode == "pause":
        tx.transition(tx.saga, SagaStatus.RECOVERY_REQUIRED, event=E.RECOVERY_REQUIRED, error=error)
    else:
        tx.transition(tx.saga, SagaStatus.FAILED, event=E.SAGA_FAILED, error=error)


def _checked_outcome(claim: Claim, outcome: executor.Outcome) -> executor.Outcome:
    """Output is validated after the call; a bad output keeps its receipt and counts as a permanent failure."""
    if not outcome.ok:
        return outcome
    errors = _actions.output_errors(claim.pinned.definition, outcome.result)
    if not errors:
        return outcome
    error = {
        "code": "OUTPUT_INVALID",
        "message": f"{claim.pinned.action}@{claim.pinned.version} answered with output that does not match its "
        f"output_schema: {'; '.join(errors[:5])}. The answer is kept as the step's receipt.",
        "retryable": False,
        "uncertain": False,
    }
    return executor.Outcome(ok=False, result=outcome.result, error=error)


def _owns(tx: Tx, claim: Claim) -> tuple[Node | None, Step] | None:
    step = Step.objects.get(pk=claim.step_id)
    holder: Node | Saga = tx.saga
    node = None
    if claim.node_id:
        node = Node.objects.get(pk=claim.node_id)
        holder = node
    still_ours = holder.fence_token == claim.fence and step.status == T.EXECUTING
    if node is not None:
        still_ours = still_ours and node.status == N.EXECUTING
    if not still_ours:
        # A stale worker: someone reclaimed the lease. Its outcome is evidence, never state.
        tx.record(
            E.STALE_WRITE_REFUSED,
            node=node,
            step=step,
            status=step.status,
            data={"attempt": claim.attempt, "fence_token": claim.fence},
        )
        return None
    return node, step


def _record(claim: Claim, outcome: executor.Outcome) -> str:
    """Phase 3. Returns 'completed', 'retry', 'failed' or 'stale'."""
    outcome = _checked_outcome(claim, outcome)
    with locked_saga(claim.saga_id, claim.actor) as tx:
        owned = _owns(tx, claim)
        if owned is None:
            return "stale"
        node, step = owned
        if outcome.ok:
            _record_success(tx, node, step, outcome.result)
            return "completed"
        return _record_failure(tx, claim, node, step, outcome)


def _record_success(tx: Tx, node: Node | None, step: Step, result: Any) -> None:
    tx.transition(step, T.COMPLETED, event=E.STEP_COMPLETED, result=result, error=None, uncertain_outcome=False)
    if node is None:
        tx.update(tx.saga, lease_owner="", lease_expires_at=None)
        return
    tx.transition(
        node,
        N.COMPLETED,
        event=E.NODE_COMPLETED,
        result=result,
        error=None,
        lease_owner="",
        lease_expires_at=None,
        uncertain_outcome=False,
    )
    _graph.promote_dependants(tx, node)


def _record_failure(tx: Tx, claim: Claim, node: Node | None, step: Step, outcome: executor.Outcome) -> str:
    error = dict(outcome.error or {})
    policy = claim.pinned.policy
    attempts_left = claim.attempt < int(policy["forward"]["max_attempts"])
    receipt = outcome.result if outcome.result is not None else step.result
    if outcome.retryable and attempts_left and tx.saga.status == SagaStatus.ACTIVE:
        delay = backoff_seconds(policy["forward"], claim.attempt, str(step.id))
        error["next_attempt_in_seconds"] = round(delay, 3)
        tx.transition(
            step,
            T.FAILED,
            event=E.STEP_ATTEMPT_FAILED,
            error=error,
            result=receipt,
            uncertain_outcome=outcome.uncertain,
        )
        if node is not None:
            tx.transition(
                node,
                N.READY,
                error=error,
                lease_owner="",
                lease_expires_at=None,
                next_attempt_at=timezone.now() + timedelta(seconds=delay),
            )
        tx.record(
            E.STEP_RETRY_SCHEDULED,
            node=node,
            step=step,
            status=T.FAILED,
            data={"attempt": claim.attempt, "delay_seconds": round(delay, 3), "error_code": error.get("code")},
        )
        return "retry"
    error["attempts"] = claim.attempt
    tx.transition(step, T.FAILED, event=E.STEP_FAILED, error=error, result=receipt, uncertain_outcome=outcome.uncertain)
    if node is not None:
        tx.transition(
            node,
            N.FAILED,
            event=E.NODE_FAILED,
            error=error,
            uncertain_outcome=outcome.uncertain,
            lease_owner="",
            lease_expires_at=None,
        )
        _graph.block_dependants(tx, node, "a dependency failed")
    else:
        tx.update(tx.saga, lease_owner="", lease_expires_at=None)
    _apply_failure_mode(tx, str(policy["failure_mode"]), {**error, "step_id": str(step.id)})
    return "failed"


def _attempt(claim: Claim) -> str:
    outcome = executor.perform(claim.pinned.definition, claim.context(), compensation=False, lease=claim.lease())
    return _record(claim, outcome)


# --- immediate steps ------------------------------------------------------------------------------------------------


def _claim_immediate(actor: Principal, saga_id: object, pinned: _actions.Pinned, payload: dict[str, Any]) -> Claim:
    with locked_saga(saga_id, actor) as tx:
        if tx.saga.status != SagaStatus.ACTIVE:
            raise InvalidTransition(
                "SAGA_NOT_ACTIVE",
                f"Saga {tx.saga.id} is {tx.saga.status}; executing a step needs ACTIVE. Nothing ran.",
            )
        fence = tx.saga.fence_token + 1
        tx.update(tx.saga, fence_token=fence, lease_owner=worker_id(), lease_expires_at=lease_deadline())
        step = _new_step(tx, pinned, payload, None, fence)
        tx.record(E.STEP_STARTED, step=step, status=T.EXECUTING, data={"attempt": 1})
    return Claim(actor, tx.saga.id, step.id, None, fence, 1, pinned, payload)


def _reclaim_immediate(claim: Claim) -> Claim | None:
    """Start the next attempt of an immediate step under the same fence, unless the saga moved on meanwhile."""
    with locked_saga(claim.saga_id, claim.actor) as tx:
        step = Step.objects.get(pk=claim.step_id)
        if tx.saga.status != SagaStatus.ACTIVE or tx.saga.fence_token != claim.fence or step.status != T.FAILED:
            return None
        tx.update(tx.saga, lease_owner=worker_id(), lease_expires_at=lease_deadline())
        tx.transition(step, T.EXECUTING, attempts=step.attempts + 1, error=None)
        tx.record(E.STEP_STARTED, step=step, status=T.EXECUTING, data={"attempt": step.attempts})
    return Claim(claim.actor, claim.saga_id, claim.step_id, None, claim.fence, step.attempts, claim.pinned, claim.input)


def saga_step_execute(
    *, actor: Principal, saga_id: object, action: str, input: dict[str, Any], version: str | None = None
) -> Step:
    """Run one action now, outside the DAG. Needs ACTIVE.

    Input is validated before any step exists. The step is journaled EXECUTING, called with its id as idempotency
    key, retried per the contract with the same id, and recorded COMPLETED or FAILED. Exhausted retries apply
    the contract's failure_mode (rollback: compensate the saga now; pause: RECOVERY_REQUIRED) and raise
    ACTION_FAILED_PERMANENT describing what happened.
    """
    pinned = _actions.resolve(action, version)
    payload = _actions.check_input(pinned, input)
    first = _claim_immediate(actor, saga_id, pinned, payload)
    step_id, saga_pk = first.step_id, first.saga_id
    claim: Claim | None = first
    while claim is not None:
        verdict = _attempt(claim)
        if verdict != "retry":
            break
        waiting = (Step.objects.get(pk=step_id).error or {}).get("next_attempt_in_seconds", 0)
        time.sleep(min(float(waiting), IMMEDIATE_MAX_BACKOFF_WAIT_SECONDS))
        claim = _reclaim_immediate(claim)
    step = Step.objects.get(pk=step_id)
    if step.status == T.COMPLETED:
        return step
    return _raise_step_failure(actor, step, saga_pk)


def _raise_step_failure(actor: Principal, step: Step, saga_pk: uuid.UUID) -> Step:
    saga = _finish_failed_saga(actor, saga_pk)
    error = step.error or {}
    raise ActionFailedPermanent(
        message=f"Step {step.sequence} ({step.action}@{step.action_version}) failed after {step.attempts} "
        f"attempt(s): {str(error.get('message', error.get('code', 'unknown error'))).rstrip('.')}. "
        + _saga_outcome_sentence(saga),
        step_id=str(step.id),
        saga_status=saga.status,
        error=error,
    )


def _finish_failed_saga(actor: Principal, saga_id: uuid.UUID) -> Saga:
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
        SagaStatus.FAILED: "The saga FAILED and its rollback is pending while other work is in flight; call "
        "rollback_saga once it finishes.",
    }.get(SagaStatus(saga.status), f"The saga is {saga.status}.")


# --- ready nodes ----------------------------------------------------------------------------------------------------


def _require_int(value: object, name: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise InvalidInput(message=f"{name} must be an integer from {low} to {high}, got {value!r}.")
    return value


def _next_retry_delay(saga_id: uuid.UUID) -> float | None:
    due = Node.objects.filter(saga_id=saga_id, status=N.READY).aggregate(at=Min("next_attempt_at"))["at"]
    return None if due is None else max(0.0, (due - timezone.now()).total_seconds())


def saga_run_ready(*, actor: Principal, saga_id: object, max_parallel: int = 4, max_steps: int = 100) -> RunReport:
    """Execute ready nodes in dependency waves until none is ready, max_steps attempts started, or the saga left
    ACTIVE. Independent ready nodes run concurrently (at most max_parallel at once) on the embedded executor.

    A node failing with attempts left is retried after its backoff (waited for here up to
    RUN_MAX_RETRY_WAIT_SECONDS). A saga that FAILED during the run (failure_mode rollback) is compensated before
    returning. Errors: SAGA_NOT_FOUND, SAGA_NOT_ACTIVE, INVALID_INPUT for out-of-range limits.
    """
    _require_int(max_parallel, "max_parallel", 1, 32)
    _require_int(max_steps, "max_steps", 1, 1000)
    with locked_saga(saga_id, actor) as tx:
        if tx.saga.status != SagaStatus.ACTIVE:
            raise InvalidTransition(
                "SAGA_NOT_ACTIVE",
                f"Saga {tx.saga.id} is {tx.saga.status}; running steps needs ACTIVE. Nothing ran."
                + (
                    " Retry the failed node or roll back first."
                    if tx.saga.status == SagaStatus.RECOVERY_REQUIRED
                    else ""
                ),
            )
    report = RunReport(saga=tx.saga)
    _run_waves(actor, tx.saga.id, max_parallel, max_steps, report)
    report.saga = _finish_failed_saga(actor, tx.saga.id)
    return report


def _run_waves(actor: Principal, saga_id: uuid.UUID, max_parallel: int, max_steps: int, report: RunReport) -> None:
    in_flight: dict[Future[str], Claim] = {}
    while True:
        capacity = min(max_parallel - len(in_flight), max_steps - report.started)
        claims = _claim_ready(actor, saga_id, capacity)
        report.started += len(claims)
        if len(claims) == 1 and not in_flight:
            _tally(report, _attempt(claims[0]))  # one node: no thread hop
            continue
        for claim in claims:
            in_flight[executor.pool().submit(executor.in_worker_thread(partial(_attempt, claim)))] = claim
        if in_flight:
            done, _ = wait(in_flight, return_when=FIRST_COMPLETED)
            for future in done:
                in_flight.pop(future)
                _tally(report, future.result())
            continue
        if report.started >= max_steps:
            report.stopped_because = "max_steps"
            return
        if not _wait_for_retry(saga_id, report):
            return


def _wait_for_retry(saga_id: uuid.UUID, report: RunReport) -> bool:
    saga_status = Saga.objects.filter(pk=saga_id).values_list("status", flat=True).first()
    if saga_status != SagaStatus.ACTIVE:
        report.stopped_because = f"saga_{str(saga_status).lower()}"
        return False
    delay = _next_retry_delay(saga_id)
    if delay is None:
        report.stopped_because = "no_ready_nodes"
        return False
    if delay > RUN_MAX_RETRY_WAIT_SECONDS:
        report.stopped_because = "retry_scheduled_later"
        return False
    time.sleep(delay)
    return True


def _tally(report: RunReport, verdict: str) -> None:
    if verdict == "completed":
        report.completed += 1
    elif verdict == "retry":
        report.retries_scheduled += 1
    elif verdict == "failed":
        report.failed += 1
    else:
        report.stale += 1
