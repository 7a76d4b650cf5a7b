"""Executing work: immediate steps and ready DAG nodes (docs/architecture.md section 5).

Each attempt is three phases: (1) a short transaction that re-checks the saga, the pinned contract, approval and
input, takes the lease (fence + 1) and writes the step as EXECUTING (write-ahead); (2) the call, outside any
transaction, with the step id as idempotency key and a heartbeat on the lease; (3) a short transaction that
records the outcome only if the fence still matches. Retries reuse the step id.

Nodes run where a nudge lands (a Celery worker, or the embedded executor's threads): `node_execute` claims the
node if it is still READY and the saga's current run has capacity, and after recording an outcome it claims the
next ready node of the same run in that same commit (COMPLETED(N) + EXECUTING(N+1)), so a linear saga costs one
commit per step and no broker hop; further ready nodes (fan-out) are nudged to other workers after commit.
"""

from __future__ import annotations

import logging
import time
import uuid
from dataclasses import dataclass
from typing import Any

from django.db.models import Q, QuerySet
from django.db.models.functions import Now
from django.utils import timezone

from audit import telemetry
from audit.models import EventType as E
from governance.identity.principal import Principal, system_principal
from governance.identity.rbac import authorize
from registry.actions import InvocationContext
from registry.contracts import backoff_seconds
from sagas import executor
from sagas.coordinator import _actions, _graph, _hot, _policy, gates, preview
from sagas.coordinator._tx import Tx, locked_saga, parse_uuid
from sagas.coordinator.compensation import saga_rollback
from sagas.coordinator.planning import request_approval
from sagas.dispatch import nudge_node, nudge_rollback
from sagas.errors import ActionFailedPermanent, InvalidTransition, SagaError
from sagas.leases import LeaseRef, lease_deadline, seconds_from_now, worker_id
from sagas.models import Node, Saga, Step
from sagas.states import ApprovalStatus, SagaStatus
from sagas.states import NodeStatus as N
from sagas.states import StepStatus as T

logger = logging.getLogger("sagas.coordinator")

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
    prior_receipt: Any = None  # the previous attempt's receipt, kept when it failed (see InvocationContext)

    def context(self) -> InvocationContext:
        return InvocationContext(
            saga_id=str(self.saga_id),
            step_id=str(self.step_id),
            idempotency_key=str(self.step_id),
            input=self.input,
            attempt=self.attempt,
            prior_receipt=self.prior_receipt,
        )

    def lease(self) -> LeaseRef:
        if self.node_id is None:
            return LeaseRef(Step, self.step_id, self.fence)
        return LeaseRef(Node, self.node_id, self.fence)


# --- phase 1: claim ---------------------------------------------------------------------------------------------


def _new_step(
    tx: Tx, pinned: _actions.Pinned, payload: dict[str, Any], node: Node | None, fence: int, **lease: Any
) -> Step:
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
        **lease,
    )
    step.save(force_insert=True)
    tx.update(tx.saga, next_sequence=tx.saga.next_sequence + 1)
    return step


def _check_approval(node: Node) -> None:
    if node.approval_required and not _has_binding_approval(node):
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
        apply_failure_mode(tx, _failure_mode_of(node), refusal.as_dict())
        if tx.saga.status == SagaStatus.FAILED and executing_count(tx.saga) == 0:
            nudge_rollback(tx.saga.id)  # nothing else is in flight to start the unwinding when it ends
        return None
    # The kill switch is checked at the claim itself, so nodes already queued on workers stop too.
    if _policy.kill_switch_stop(tx, f"running node {node.key or node.id}", node) or not _passes_policy(
        tx, node, pinned
    ):
        return None
    fence = node.fence_token + 1
    step = node.step
    prior = None
    if step is None:
        step = _new_step(tx, pinned, payload, node, fence)
    else:
        prior = _prior_receipt(step)
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
        dispatched_at=None,
    )
    tx.update(tx.saga, run_steps_left=max(0, tx.saga.run_steps_left - 1))
    tx.record(
        E.STEP_STARTED, node=node, step=step, status=T.EXECUTING, data={"attempt": node.attempts, "worker": worker_id()}
    )
    return Claim(tx.actor, tx.saga.id, step.id, node.id, fence, node.attempts, pinned, payload, prior)


def _prior_receipt(step: Step) -> Any:
    """The receipt the failed attempt left in its error (read before the retry clears the error)."""
    return (step.error or {}).get("receipt") if isinstance(step.error, dict) else None


def _passes_policy(tx: Tx, node: Node, pinned: _actions.Pinned) -> bool:
    """Policy is re-evaluated for THIS node right before its side effect, in every wave: a policy tightened after
    planning stops the node with zero executions (denied: the saga waits for an operator; approval now required:
    the node waits for one)."""
    decision = _policy.decide(tx, "run", pinned, node=node)
    if decision.effect == "deny":
        error = _policy.refusal(decision, f"running node {node.key or node.id}").as_dict()
        tx.transition(node, N.FAILED, event=E.NODE_FAILED, error=error)
        _graph.block_dependants(tx, node, "a dependency was refused by tenant policy")
        apply_failure_mode(tx, "pause", error)
        return False
    # Checked whatever the node was planned with: a gate the policy added after planning binds like any other.
    if decision.effect == "require_approval" and not _has_binding_approval(node):
        tx.transition(
            node, N.WAITING_APPROVAL, approval_required=True, error=None, next_attempt_at=None, dispatched_at=None
        )
        request_approval(tx, node, f"policy:{','.join(decision.matched_rules)}")
        return False
    return True


def _has_binding_approval(node: Node) -> bool:
    """An APPROVED decision bound to the node's current contract hash and input digest exists."""
    approval = node.approvals.filter(status=ApprovalStatus.APPROVED).order_by("-decided_at").first()
    return (
        approval is not None
        and approval.definition_hash == node.action_definition_hash
        and approval.input_digest == _actions.input_digest(node.input)
    )


def _failure_mode_of(node: Node) -> str:
    try:
        return str(_actions.resolve(node.action, node.action_version).policy["failure_mode"])
    except SagaError:
        return "pause"  # without a readable contract, guessing "rollback" could unwind work nobody can verify


def ready_due(saga: Saga) -> QuerySet[Node]:
    """READY nodes of the saga whose retry backoff (if any) has passed, in planning order."""
    due = Q(next_attempt_at__isnull=True) | Q(next_attempt_at__lte=Now())
    return Node.objects.filter(saga=saga, status=N.READY).filter(due).select_related("step").order_by("position")


def executing_count(saga: Saga) -> int:
    return Node.objects.filter(saga=saga, status=N.EXECUTING).count()


def ready_within_capacity(tx: Tx, only: uuid.UUID | None = None) -> list[Node]:
    """The ready nodes (or the one node `only`) that the saga's current run may start now, across all workers.

    One query: the ready rows carry the saga's EXECUTING count, so the capacity check costs no round trip of its
    own; none at all when the run is spent or the saga is not ACTIVE.
    """
    saga = tx.saga
    if saga.status != SagaStatus.ACTIVE or saga.run_steps_left <= 0:
        return []
    rows = _hot.ready_nodes(saga.id, saga.run_max_parallel, only)
    if not rows:
        return []
    free = min(saga.run_max_parallel - getattr(rows[0], "executing"), saga.run_steps_left)  # noqa: B009
    return rows[: max(0, free)]


def capacity(tx: Tx) -> int:
    """How many more attempts the saga's current run may start now, across all workers."""
    if tx.saga.status != SagaStatus.ACTIVE:
        return 0
    return max(0, min(tx.saga.run_max_parallel - executing_count(tx.saga), tx.saga.run_steps_left))


def dispatch_ready(tx: Tx, *, chain: bool) -> Claim | None:
    """Within the run's capacity: claim the first ready node here (chain=True) and nudge the rest to others."""
    nodes = ready_within_capacity(tx)
    claimed = None
    nudged: list[Node] = []
    for node in nodes:
        if chain and claimed is None:
            claimed = _claim_node(tx, node)
            if claimed is not None:
                continue
        nudged.append(node)
    tx.update_many(nudged, dispatched_at=timezone.now())
    for node in nudged:
        nudge_node(tx.saga.id, node.id)
    return claimed


def _run_actor(saga: Saga) -> Principal:
    """Workers act on behalf of whoever requested the current run."""
    if not saga.run_principal_id:
        return system_principal(saga.tenant_id)
    return Principal(
        principal_id=saga.run_principal_id,
        tenant_id=saga.tenant_id,
        principal_type=saga.run_principal_type or "user",
        authenticated=True,
        protocol="worker",
    )


def _claim_nudged(saga_id: object, node_id: object) -> Claim | None:
    saga_pk, node_pk = parse_uuid(saga_id), parse_uuid(node_id)
    if saga_pk is None or node_pk is None:
        return None
    saga = Saga.objects.filter(pk=saga_pk).first()
    if saga is None:
        return None
    with locked_saga(saga.id, _run_actor(saga)) as tx:
        tx.actor = _run_actor(tx.saga)
        nodes = ready_within_capacity(tx, only=node_pk)
        if not nodes:
            # Duplicate, late or over-capacity nudge: someone else got there first, or the run is spent.
            logger.info("nudge has nothing to do saga_id=%s node_id=%s", saga_id, node_id)
            return None
        return _claim_node(tx, nodes[0])


def node_execute(*, saga_id: object, node_id: object, trace: dict[str, str] | None = None) -> int:
    """Run a nudged node, then keep going with the next ready nodes of the same run (chained commits).

    Precondition: none; a nudge for a node that is no longer READY and due, or a saga whose run is spent or that
    left ACTIVE, does nothing. Returns how many attempts this call ran. Called by `node_execute_task` and by the
    embedded executor.
    """
    with telemetry.attached(trace), telemetry.span("saga.node_execute", saga_id=str(saga_id)):
        claim = _claim_nudged(saga_id, node_id)
        ran = 0
        while claim is not None:
            claim = _run_claim(claim)
            ran += 1
    return ran


def _run_claim(claim: Claim) -> Claim | None:
    attributes = {"saga_id": str(claim.saga_id), "action": claim.pinned.action, "attempt": claim.attempt}
    with telemetry.span("saga.node_attempt", node_id=str(claim.node_id), **attributes):
        return _record(claim, _perform(claim))


def _perform(claim: Claim) -> executor.Outcome:
    started = time.monotonic()
    outcome = executor.perform(claim.pinned.definition, claim.context(), compensation=False, lease=claim.lease())
    seconds = time.monotonic() - started
    telemetry.observe_seconds(
        "saga.attempt.duration", "Time an action call took", seconds, outcome="ok" if outcome.ok else "failed"
    )
    return outcome


# --- phase 3: record ----------------------------------------------------------------------------------------------


def apply_failure_mode(tx: Tx, failure_mode: str, error: dict[str, Any]) -> None:
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
    node = None
    if claim.node_id:
        node = Node.objects.select_related("step").get(pk=claim.node_id)  # node and its step in one query
        step = node.step if node.step_id == claim.step_id and node.step else Step.objects.get(pk=claim.step_id)
        holder: Node | Step = node
    else:
        step = holder = Step.objects.get(pk=claim.step_id)
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


def _record(claim: Claim, outcome: executor.Outcome) -> Claim | None:
    """Phase 3 for a node, in one commit with what follows: the next ready node claimed here (chained), further
    ready nodes nudged to other workers, or the rollback nudged once nothing of a FAILED saga is in flight."""
    _, chained = _record_outcome(claim, outcome)
    return chained


def _record_outcome(claim: Claim, outcome: executor.Outcome) -> tuple[str, Claim | None]:
    """Returns the verdict ('completed', 'retry', 'failed' or 'stale') and the chained next claim, if any."""
    outcome = _checked_outcome(claim, outcome)
    with locked_saga(claim.saga_id, claim.actor) as tx:
        owned = _owns(tx, claim)
        if owned is None:
            return "stale", None
        node, step = owned
        if outcome.ok:
            _record_success(tx, node, step, outcome.result)
            verdict = "completed"
        else:
            verdict = _record_failure(tx, claim, node, step, outcome)
        telemetry.count("saga.attempts", "Action attempts by outcome", outcome=verdict)
        return verdict, (_follow_up(tx) if node is not None else None)


def _follow_up(tx: Tx) -> Claim | None:
    if tx.saga.status == SagaStatus.FAILED:
        if executing_count(tx.saga) == 0:
            nudge_rollback(tx.saga.id)  # the last attempt in flight starts the unwinding
        return None
    return dispatch_ready(tx, chain=True)


def _record_success(tx: Tx, node: Node | None, step: Step, result: Any) -> None:
    release = {"lease_owner": "", "lease_expires_at": None} if node is None else {}
    tx.transition(
        step, T.COMPLETED, event=E.STEP_COMPLETED, result=result, error=None, uncertain_outcome=False, **release
    )
    if node is None:
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
                next_attempt_at=seconds_from_now(delay),
                dispatched_at=timezone.now(),
            )
            nudge_node(tx.saga.id, node.id, delay=delay)
        tx.record(
            E.STEP_RETRY_SCHEDULED,
            node=node,
            step=step,
            status=T.FAILED,
            data={"attempt": claim.attempt, "delay_seconds": round(delay, 3), "error_code": error.get("code")},
        )
        return "retry"
    error["attempts"] = claim.attempt
    release = {"lease_owner": "", "lease_expires_at": None} if node is None else {}
    tx.transition(
        step, T.FAILED, event=E.STEP_FAILED, error=error, result=receipt, uncertain_outcome=outcome.uncertain, **release
    )
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
    apply_failure_mode(tx, str(policy["failure_mode"]), {**error, "step_id": str(step.id)})
    return "failed"


def _attempt_immediate(claim: Claim) -> str:
    verdict, _ = _record_outcome(claim, _perform(claim))
    return verdict


# --- immediate steps ------------------------------------------------------------------------------------------------


def _claim_immediate(
    actor: Principal, saga_id: object, pinned: _actions.Pinned, payload: dict[str, Any]
) -> Claim | Step:
    """Phase 1 of an immediate step; in a preview saga, the whole dry step (a DRY Step, nothing to call)."""
    with locked_saga(saga_id, actor) as tx:
        if tx.saga.status != SagaStatus.ACTIVE:
            raise InvalidTransition(
                "SAGA_NOT_ACTIVE",
                f"Saga {tx.saga.id} is {tx.saga.status}; executing a step needs ACTIVE. Nothing ran.",
            )
        if tx.saga.preview:
            return preview.dry_execute(tx, pinned, payload)
        if stop := _policy.kill_switch_stop(tx, f"executing {pinned.action}"):
            tx.refuse(stop)
            return None  # type: ignore[return-value]  # never returned: the refusal is raised after commit
        decision = _policy.decide(tx, "execute", pinned)
        if decision.effect == "deny":
            tx.refuse(_policy.refusal(decision, f"executing {pinned.action}@{pinned.version} immediately"))
            return None  # type: ignore[return-value]  # never returned: the refusal is raised after commit
        if decision.effect == "require_approval" or pinned.policy["approval_required"]:
            rules = ", ".join(decision.matched_rules)
            source = f"tenant policy rule {rules}" if decision.effect == "require_approval" else "its contract"
            tx.refuse(gates.approval_needed(pinned.action, pinned.version, source))
            return None  # type: ignore[return-value]  # never returned: the refusal is raised after commit
        step = _new_step(tx, pinned, payload, None, 1, lease_owner=worker_id(), lease_expires_at=lease_deadline())
        tx.record(E.STEP_STARTED, step=step, status=T.EXECUTING, data={"attempt": 1, "worker": worker_id()})
    return Claim(actor, tx.saga.id, step.id, None, 1, 1, pinned, payload)


def _reclaim_immediate(claim: Claim) -> Claim | None:
    """Start the next attempt of an immediate step under the same fence, unless the saga moved on meanwhile."""
    with locked_saga(claim.saga_id, claim.actor) as tx:
        step = Step.objects.get(pk=claim.step_id)
        if tx.saga.status != SagaStatus.ACTIVE or step.fence_token != claim.fence or step.status != T.FAILED:
            return None
        prior = _prior_receipt(step)
        tx.transition(
            step,
            T.EXECUTING,
            attempts=step.attempts + 1,
            error=None,
            lease_owner=worker_id(),
            lease_expires_at=lease_deadline(),
        )
        tx.record(E.STEP_STARTED, step=step, status=T.EXECUTING, data={"attempt": step.attempts, "worker": worker_id()})
    return Claim(
        claim.actor, claim.saga_id, claim.step_id, None, claim.fence, step.attempts, claim.pinned, claim.input, prior
    )


def saga_step_execute(
    *, actor: Principal, saga_id: object, action: str, input: dict[str, Any], version: str | None = None
) -> Step:
    """Run one action now, outside the DAG. Needs ACTIVE.

    Input is validated before any step exists. The step is journaled EXECUTING, called with its id as idempotency
    key, retried per the contract with the same id, and recorded COMPLETED or FAILED. Exhausted retries apply
    the contract's failure_mode (rollback: compensate the saga now; pause: RECOVERY_REQUIRED) and raise
    ACTION_FAILED_PERMANENT describing what happened.
    """
    authorize(actor, "execute")
    pinned = _actions.resolve(action, version)
    payload = _actions.check_input(pinned, input)
    first = _claim_immediate(actor, saga_id, pinned, payload)
    if isinstance(first, Step):
        return first  # a preview saga: journaled DRY, nothing called
    step_id, saga_pk = first.step_id, first.saga_id
    claim: Claim | None = first
    while claim is not None:
        verdict = _attempt_immediate(claim)
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
        SagaStatus.FAILED: "The saga FAILED; its rollback starts automatically as soon as the work still in "
        "flight finishes (get_saga shows progress).",
    }.get(SagaStatus(saga.status), f"The saga is {saga.status}.")
