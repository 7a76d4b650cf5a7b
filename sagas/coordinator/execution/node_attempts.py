"""Node attempts: claim a nudged ready node, run it, record its outcome and continue the run (docs/architecture.md
section 5; the three phases are in sagas.coordinator.execution.attempts).

Nodes run where a nudge lands (a Celery worker, or the embedded executor's threads): `node_execute` claims the
node if it is still READY and the saga's current run has capacity, and after recording an outcome it claims the
next ready node of the same run in that same commit (COMPLETED(N) + EXECUTING(N+1)), so a linear saga costs one
commit per step and no broker hop. Further ready nodes (fan-out) are claimed in that commit too, one per free
fan-out thread of this process (sagas.coordinator.execution.fan_out), and only those beyond are nudged to other workers.

The claim re-checks everything under the saga lock, for THIS node now: the pinned contract still matches, a
required approval is bound to its contract and input, the input is valid, no kill switch is engaged, and tenant
policy still allows it (a policy tightened after planning stops the node with zero executions).
"""

from __future__ import annotations

import logging
from datetime import timedelta
from functools import partial

from django.utils import timezone

from audit import telemetry
from audit.models import EventType as E
from governance.identity.principal import Principal, system_principal
from sagas import executor
from sagas.coordinator import _actions, _graph
from sagas.coordinator import policy as _policy
from sagas.coordinator._actions import is_proxied_action
from sagas.coordinator._approval_requests import request_approval
from sagas.coordinator._leases import lease_deadline, worker_id
from sagas.coordinator._tx import Tx, locked_saga
from sagas.coordinator.execution import nudges
from sagas.coordinator.execution.attempts import Claim, apply_failure_mode, new_step, perform, prior_receipt
from sagas.coordinator.execution.fan_out import NUDGE_IN_FLIGHT_SECONDS, LocalClaims
from sagas.coordinator.execution.group_commit import record_grouped
from sagas.coordinator.execution.ready_queries import executing_count, pinned_contract_row, ready_within_capacity
from sagas.coordinator.execution.run_changes import RUN_CHANGES
from sagas.errors import SagaError
from sagas.models import Node, Saga
from sagas.selectors.approvals import has_binding_approval
from sagas.selectors.scope import parse_uuid
from sagas.states import NodeStatus, SagaStatus, StepStatus

logger = logging.getLogger("sagas.coordinator")


def node_execute(*, saga_id: object, node_id: object, trace: dict[str, str] | None = None) -> int:
    """Run a nudged node, then keep going with the next ready nodes of the same run (chained commits).

    Precondition: none; a nudge for a node that is no longer READY and due, or a saga whose run is spent or that
    left ACTIVE, does nothing. Returns how many attempts this call ran. Called by `node_execute_task`, on a Celery
    worker or on the embedded executor's threads.
    """
    with telemetry.attached(trace), telemetry.span("saga.node_execute", saga_id=str(saga_id)):
        claim = _claim_nudged(saga_id, node_id)
        ran = 0
        while claim is not None:
            claim = _run_claim(claim)
            ran += 1
    return ran


def dispatch_ready(tx: Tx, *, chain: bool, local: LocalClaims | None = None) -> Claim | None:
    """Within the run's capacity: claim the first ready node for this thread (chain=True), then one for each free
    fan-out thread of this process (`local`, run after commit: sagas.coordinator.execution.fan_out), and nudge the rest
    to other workers in one batch."""
    nodes = ready_within_capacity(tx)
    claimed = None
    nudged: list[Node] = []
    for node in nodes:
        if chain and claimed is None:
            claimed = _claim_node(tx, node)
            if claimed is not None:
                continue
        elif local is not None and _claim_locally(tx, node, local):
            continue
        nudged.append(node)
    _nudge_once(tx, nudged)
    return claimed


def _nudge_once(tx: Tx, nodes: list[Node]) -> None:
    """Nudge the nodes in one batch, except those nudged a moment ago: that nudge is still on its way, and a second
    one would only queue one more claim transaction on the saga lock. A nudge that was lost, or that found the run
    at capacity, is sent again by the next finishing node after `fan_out.NUDGE_IN_FLIGHT_SECONDS`, or by the
    recovery sweep."""
    now = timezone.now()
    recent = now - timedelta(seconds=NUDGE_IN_FLIGHT_SECONDS)
    due = [node for node in nodes if node.dispatched_at is None or node.dispatched_at < recent]
    tx.update_many(due, dispatched_at=now)
    for node in due:
        nudges.nudge_node(tx.saga.id, node.id)


def _claim_locally(tx: Tx, node: Node, local: LocalClaims) -> bool:
    """Claim `node` for a fan-out thread of this process, if one is free and the saga still runs.

    A refusal, kill switch or policy stop of an earlier claim in this commit may have stopped the saga; the claim
    checks themselves do not look at the saga's status (the ready query does), so it is checked here."""
    if tx.saga.status != SagaStatus.ACTIVE or not local.reserve():
        return False
    claim = _claim_node(tx, node)
    if claim is None:
        local.unreserve()
        return False
    local.keep(claim)
    return True


# --- phase 1: claim -----------------------------------------------------------------------------------------------


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


def _claim_node(tx: Tx, node: Node) -> Claim | None:
    if is_proxied_action(tx.saga, node.action):
        return None  # a held proxied call: its proxy forwards it once approved (sagas.coordinator.proxy.held_calls)
    try:
        pinned = _pinned(node)
        _check_approval(node)
        payload = _actions.check_input(pinned, node.input)
    except SagaError as refusal:
        _refuse_before_start(tx, node, refusal)
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
        step = new_step(tx, pinned, payload, node, fence)
    else:
        prior = prior_receipt(step)
        tx.transition(step, StepStatus.EXECUTING, attempts=step.attempts + 1, fence_token=fence, error=None)
    tx.transition(
        node,
        NodeStatus.EXECUTING,
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
        E.STEP_STARTED,
        node=node,
        step=step,
        status=StepStatus.EXECUTING,
        data={"attempt": node.attempts, "worker": worker_id()},
    )
    return Claim(tx.actor, tx.saga.id, step.id, node.id, fence, node.attempts, pinned, payload, prior)


def _pinned(node: Node) -> _actions.Pinned:
    """The contract the node pinned, from the registry row its ready query read (or from the registry)."""
    stored = pinned_contract_row(node)
    if stored is None:
        return _actions.pinned_version(node.action, node.action_version, node.action_definition_hash)
    return _actions.pinned_from_stored(node.action, node.action_version, node.action_definition_hash, stored)


def _refuse_before_start(tx: Tx, node: Node, refusal: SagaError) -> None:
    """The node cannot start (its contract, approval or input no longer holds): it FAILED without a step."""
    tx.transition(node, NodeStatus.FAILED, event=E.NODE_FAILED, error=refusal.as_dict())
    _graph.block_dependants(tx, node, f"dependency refused before start: {refusal.code}")
    apply_failure_mode(tx, _failure_mode_of(node), refusal.as_dict())
    if tx.saga.status == SagaStatus.FAILED and executing_count(tx.saga) == 0:
        nudges.nudge_rollback(tx.saga.id)  # nothing else is in flight to start the unwinding when it ends


def _check_approval(node: Node) -> None:
    if node.approval_required and not has_binding_approval(node):
        raise SagaError(
            "APPROVAL_NOT_BINDING",
            f"Node {node.key or node.id} has no approval bound to its current contract and input. Nothing ran. "
            "Retry the node to request a fresh approval.",
        )


def _passes_policy(tx: Tx, node: Node, pinned: _actions.Pinned) -> bool:
    """Policy is re-evaluated for THIS node right before its side effect, in every wave: a policy tightened after
    planning stops the node with zero executions (denied: the saga waits for an operator; approval now required:
    the node waits for one)."""
    decision = _policy.decide(tx, "run", pinned, node=node)
    if decision.effect == "deny":
        error = _policy.refusal(decision, f"running node {node.key or node.id}").as_dict()
        tx.transition(node, NodeStatus.FAILED, event=E.NODE_FAILED, error=error)
        _graph.block_dependants(tx, node, "a dependency was refused by tenant policy")
        apply_failure_mode(tx, "pause", error)
        return False
    # Checked whatever the node was planned with: a gate the policy added after planning binds like any other.
    if decision.effect == "require_approval" and not has_binding_approval(node):
        tx.transition(
            node,
            NodeStatus.WAITING_APPROVAL,
            approval_required=True,
            error=None,
            next_attempt_at=None,
            dispatched_at=None,
        )
        request_approval(tx, node, f"policy:{','.join(decision.matched_rules)}")
        return False
    return True


def _failure_mode_of(node: Node) -> str:
    try:
        return str(_actions.resolve(node.action, node.action_version).policy["failure_mode"])
    except SagaError:
        return "pause"  # without a readable contract, guessing "rollback" could unwind work nobody can verify


# --- phases 2 and 3: call, then record in one commit with what follows ------------------------------------------


def _run_claim(claim: Claim) -> Claim | None:
    attributes = {"saga_id": str(claim.saga_id), "action": claim.pinned.action, "attempt": claim.attempt}
    with telemetry.span("saga.node_attempt", node_id=str(claim.node_id), **attributes):
        return _record(claim, perform(claim))


def _record(claim: Claim, outcome: executor.Outcome) -> Claim | None:
    """Phase 3 for a node, in one commit with what follows: the next ready node claimed here (chained), more ready
    nodes claimed for this process's fan-out threads and started once committed, further ready nodes nudged to
    other workers, or the rollback nudged once nothing of a FAILED saga is in flight."""
    local = LocalClaims()
    try:
        # Shared with outcomes of the same saga finishing meanwhile on this process's threads (group commit).
        _, chained = record_grouped(claim, outcome, partial(_follow_up, local=local), local.release)
        RUN_CHANGES.changed(claim.saga_id)  # committed: a run_ready_steps waiting in this process looks again
        local.launch(_run_claim)  # committed (locked_saga is durable): the claims exist, so they run
    finally:
        local.release()  # a rolled-back commit's claims never existed: their threads are free again
    return chained


def _follow_up(tx: Tx, local: LocalClaims | None = None) -> Claim | None:
    if tx.saga.status == SagaStatus.FAILED:
        if executing_count(tx.saga) == 0:
            nudges.nudge_rollback(tx.saga.id)  # the last attempt in flight starts the unwinding
        return None
    return dispatch_ready(tx, chain=True, local=local)
