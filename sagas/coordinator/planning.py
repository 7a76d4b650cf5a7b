"""Workflow planning and human decisions: plan a node, approve or reject it, retry it."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.conf import settings
from django.utils import timezone

from audit import telemetry
from audit.models import AuditEvent
from audit.models import EventType as E
from governance.errors import Forbidden, ServiceError
from governance.identity.principal import Principal
from governance.identity.rbac import authorize
from sagas.coordinator import _actions, _graph, _policy
from sagas.coordinator._tx import Tx, locked_saga, parse_uuid
from sagas.errors import InvalidInput, InvalidTransition, NotFound, SagaError
from sagas.models import Approval, Node, NodeDependency
from sagas.states import RECOVERABLE_SAGA_STATES, RETRYABLE_NODE_STATES, ApprovalStatus, SagaStatus
from sagas.states import NodeStatus as N

MAX_DEPENDENCIES = 256


def _require_status(tx: Tx, allowed: frozenset[str], what: str) -> None:
    if tx.saga.status not in allowed:
        raise InvalidTransition(
            "SAGA_NOT_ACTIVE",
            f"Saga {tx.saga.id} is {tx.saga.status}; {what} needs {' or '.join(sorted(allowed))}. Nothing was "
            "changed."
            + (
                " A RECOVERY_REQUIRED saga needs retry_saga_step or rollback first."
                if tx.saga.status == SagaStatus.RECOVERY_REQUIRED
                else ""
            ),
        )


def _find_node(tx: Tx, node_ref: object) -> Node:
    """A node of this saga by id or key; another saga's node is reported as missing."""
    nodes = Node.objects.filter(saga=tx.saga)
    parsed = parse_uuid(node_ref)
    node = nodes.filter(pk=parsed).first() if parsed else None
    if node is None and isinstance(node_ref, str):
        node = nodes.filter(key=node_ref).first()
    if node is None:
        raise NotFound(
            "NODE_NOT_FOUND",
            f"Node not found in saga {tx.saga.id}: {node_ref}. Nothing was changed. get_saga lists its nodes.",
        )
    return node


def _dependencies(tx: Tx, depends_on: object) -> list[Node]:
    if not isinstance(depends_on, list | tuple) or len(depends_on) > MAX_DEPENDENCIES:
        raise InvalidInput(message=f"depends_on must be a list of at most {MAX_DEPENDENCIES} node ids or keys.")
    found: dict[object, Node] = {}
    for ref in depends_on:
        node = _find_node(tx, ref)
        found[node.pk] = node
    return list(found.values())


def _replay(existing: Node, pinned: _actions.Pinned, payload: dict[str, Any], deps: list[Node]) -> Node:
    same = (
        existing.action == pinned.action
        and existing.action_version == pinned.version
        and existing.input == payload
        and {d.pk for d in deps} == set(existing.dependency_links.values_list("depends_on_id", flat=True))
    )
    if not same:
        raise SagaError(
            "NODE_KEY_CONFLICT",
            f"A node with key {existing.key!r} already exists in this saga with a different action, input or "
            "dependencies. Nothing was planned. Use a new key, or get_saga to see the existing node.",
        )
    return existing


def node_plan(
    *,
    actor: Principal,
    saga_id: object,
    action: str,
    input: dict[str, Any],
    key: str | None = None,
    depends_on: list[str] | None = None,
    approval_required: bool | None = None,
    version: str | None = None,
) -> Node:
    """Persist a version-pinned DAG node. Needs ACTIVE.

    The node starts WAITING_APPROVAL (contract or caller asks for approval), READY, WAITING_DEPENDENCY or BLOCKED
    (a dependency already cannot complete). Audit NODE_PLANNED (+ APPROVAL_REQUESTED). Replanning the same key with
    the same content returns the existing node. Errors: INVALID_INPUT (nothing written), ACTION_NOT_FOUND,
    NODE_NOT_FOUND (unknown dependency), NODE_KEY_CONFLICT.
    """
    authorize(actor, "plan")
    if key is not None and (not isinstance(key, str) or not key or len(key) > 200):
        raise InvalidInput(message="key must be a non-empty string of at most 200 characters, or null.")
    if approval_required is not None and not isinstance(approval_required, bool):
        raise InvalidInput(message="approval_required must be true, false or null (null = the contract decides).")
    pinned = _actions.resolve(action, version)
    payload = _actions.check_input(pinned, input)
    with locked_saga(saga_id, actor) as tx:
        _require_status(tx, frozenset({SagaStatus.ACTIVE}), "planning")
        deps = _dependencies(tx, depends_on or [])
        if key is not None and (existing := Node.objects.filter(saga=tx.saga, key=key).first()):
            return _replay(existing, pinned, payload, deps)
        if stop := _policy.kill_switch_stop(tx, f"planning {pinned.action}"):
            tx.refuse(stop)
            return None  # type: ignore[return-value]  # never returned: the refusal is raised after commit
        decision = _policy.decide(tx, "plan", pinned)
        if not decision.allowed:
            tx.refuse(_policy.refusal(decision, f"planning {pinned.action}@{pinned.version}"))
            return None  # type: ignore[return-value]  # never returned: the refusal is raised after commit
        gate = f"policy:{','.join(decision.matched_rules)}" if decision.effect == "require_approval" else None
        node = _create_node(tx, pinned, payload, key, deps, approval_required, policy_gate=gate)
    return node


def _create_node(
    tx: Tx,
    pinned: _actions.Pinned,
    payload: dict[str, Any],
    key: str | None,
    deps: list[Node],
    approval_required: bool | None,
    *,
    policy_gate: str | None = None,
) -> Node:
    # The contract's (or the policy's) gate cannot be waived by the caller; a caller may add one.
    contract_gate = bool(pinned.policy["approval_required"]) or policy_gate is not None
    node = Node(
        saga=tx.saga,
        key=key,
        position=tx.saga.next_position,
        action=pinned.action,
        action_version=pinned.version,
        action_definition_hash=pinned.definition_hash,
        input=payload,
        approval_required=contract_gate or bool(approval_required),
        status=N.WAITING_DEPENDENCY,
    )
    node.save(force_insert=True)
    tx.update(tx.saga, next_position=tx.saga.next_position + 1)
    NodeDependency.objects.bulk_create([NodeDependency(node=node, depends_on=d) for d in deps])
    node.status = _graph.waiting_status(node, approved=False)
    if node.status != N.WAITING_DEPENDENCY:
        node.save(update_fields=["status"])
    tx.record(E.NODE_PLANNED, node=node, status=node.status, data={"key": key, "depends_on": [str(d.pk) for d in deps]})
    if node.approval_required:
        request_approval(tx, node, policy_gate or ("contract" if contract_gate else "caller"))
    return node


def request_approval(tx: Tx, node: Node, requested_by: str) -> Approval:
    ttl = settings.SAGA_APPROVAL_TTL_SECONDS
    approval = Approval.objects.create(
        node=node,
        requested_by=requested_by,
        definition_hash=node.action_definition_hash,
        input_digest=_actions.input_digest(node.input),
        expires_at=timezone.now() + timedelta(seconds=ttl) if ttl else None,
    )
    tx.record(
        E.APPROVAL_REQUESTED,
        node=node,
        status=ApprovalStatus.PENDING,
        data={"approval_id": str(approval.id), "requested_by": requested_by},
    )
    return approval


def node_approve(
    *, actor: Principal, saga_id: object, node_id: object, approved: bool = True, reason: str | None = None
) -> Node:
    """Decide a WAITING_APPROVAL node. Needs ACTIVE or RECOVERY_REQUIRED.

    Approve: approval APPROVED bound to the node's hash and input digest; node READY or WAITING_DEPENDENCY; audit
    APPROVAL_GRANTED. Reject: node REJECTED, its dependants BLOCKED, saga RECOVERY_REQUIRED (retry re-requests
    approval, rollback unwinds); audit APPROVAL_REJECTED. The reason text is never audited.
    """
    if not isinstance(approved, bool):
        raise InvalidInput(message="approved must be true or false.")
    authorize(actor, "approve" if approved else "reject")
    if reason is not None and (not isinstance(reason, str) or len(reason) > 4000):
        raise InvalidInput(message="reason must be a string of at most 4000 characters, or null.")
    with locked_saga(saga_id, actor) as tx:
        _require_status(tx, RECOVERABLE_SAGA_STATES, "an approval decision")
        node = _find_node(tx, node_id)
        approval = node.approvals.filter(status=ApprovalStatus.PENDING).first()
        if node.status != N.WAITING_APPROVAL or approval is None:
            raise InvalidTransition(
                "NODE_NOT_WAITING_APPROVAL",
                f"Node {node.key or node.id} is {node.status}, not waiting for approval. Nothing was changed.",
            )
        if approved and approval.expires_at and approval.expires_at <= timezone.now():
            _expire(tx, node, approval)
            return node
        if approved and (refusal := _duty_conflict(tx, node)):
            tx.refuse(refusal)
            return node
        if not approved:
            _policy.safety_override(tx, "reject", node)
        elif not (decision := _policy.decide(tx, "approve", _policy.pinned_of(node), node=node)).allowed:
            tx.refuse(_policy.refusal(decision, f"approving node {node.key or node.id}"))
            return node
        decided = ApprovalStatus.APPROVED if approved else ApprovalStatus.REJECTED
        telemetry.count("saga.approvals", "Approval decisions", decision=str(decided).lower())
        Approval.objects.filter(pk=approval.pk).update(
            status=decided, decided_by=actor.principal_id, reason=reason, decided_at=timezone.now()
        )
        data = {"approval_id": str(approval.id)}
        if approved:
            tx.record(E.APPROVAL_GRANTED, node=node, status=decided, data=data)
            tx.transition(node, _graph.waiting_status(node, approved=True), event=E.NODE_READY)
        else:
            tx.record(E.APPROVAL_REJECTED, node=node, status=decided, data=data)
            _reject(tx, node)
    return node


def _expire(tx: Tx, node: Node, approval: Approval) -> None:
    """An approval decided too late counts as a rejection: the work may no longer be wanted as planned."""
    Approval.objects.filter(pk=approval.pk).update(status=ApprovalStatus.EXPIRED, decided_at=timezone.now())
    tx.record(E.APPROVAL_EXPIRED, node=node, status=ApprovalStatus.EXPIRED, data={"approval_id": str(approval.id)})
    _reject(tx, node, code="APPROVAL_EXPIRED", why="its approval request expired before anyone decided")
    tx.refuse(
        InvalidTransition(
            "APPROVAL_EXPIRED",
            f"The approval request for node {node.key or node.id} expired at {approval.expires_at:%Y-%m-%d %H:%M:%S} "
            "UTC and counts as rejected; nothing ran and the saga waits in RECOVERY_REQUIRED. Retry the node to "
            "request a fresh approval, or roll the saga back.",
        )
    )


def _duty_conflict(tx: Tx, node: Node) -> ServiceError | None:
    """With separation of duties on, whoever planned a node may not approve it."""
    if not settings.SAGA_APPROVAL_SEPARATION_OF_DUTIES:
        return None
    planner = (
        AuditEvent.objects.filter(saga_id=tx.saga.id, node_id=str(node.id), event_type=E.NODE_PLANNED)
        .values_list("actor_principal_id", flat=True)
        .first()
    )
    if planner != tx.actor.principal_id:
        return None
    return Forbidden(
        "SEPARATION_OF_DUTIES",
        f"{tx.actor.principal_id} planned node {node.key or node.id} and so may not approve it (separation of "
        "duties). Nothing was changed. Ask another operator of your tenant to approve it.",
    )


def _reject(tx: Tx, node: Node, *, code: str = "APPROVAL_REJECTED", why: str = "its approval was rejected") -> None:
    error = {
        "code": code,
        "message": f"Node {node.key or node.id} did not run: {why}. Retry the node to request approval again, or "
        "roll the saga back.",
        "node_id": str(node.id),
    }
    tx.transition(node, N.REJECTED, error=error)
    _graph.block_dependants(tx, node, "a dependency's approval was rejected")
    if tx.saga.status == SagaStatus.ACTIVE:
        tx.transition(tx.saga, SagaStatus.RECOVERY_REQUIRED, event=E.RECOVERY_REQUIRED, error=error)


def node_retry(*, actor: Principal, saga_id: object, node_id: object, force: bool = False) -> Node:
    """Return a FAILED, REJECTED or BLOCKED node to scheduling. Needs ACTIVE or RECOVERY_REQUIRED.

    A node whose outcome is uncertain needs `force=True` (the operator confirmed the external outcome was
    reconciled). A rejected node asks for approval again. The node keeps its step id. A RECOVERY_REQUIRED saga
    returns to ACTIVE. Audit NODE_RETRIED. Nothing executes until run_ready_steps.
    """
    authorize(actor, "retry")
    if not isinstance(force, bool):
        raise InvalidInput(message="force must be true or false.")
    with locked_saga(saga_id, actor) as tx:
        _require_status(tx, RECOVERABLE_SAGA_STATES, "retry")
        node = _find_node(tx, node_id)
        if node.status not in RETRYABLE_NODE_STATES:
            raise InvalidTransition(
                "NODE_NOT_RETRYABLE",
                f"Node {node.key or node.id} is {node.status}; only FAILED, REJECTED or BLOCKED nodes can be "
                "retried. Nothing was changed.",
            )
        if node.uncertain_outcome and not force:
            raise SagaError(
                "UNCERTAIN_OUTCOME",
                f"Node {node.key or node.id} may or may not have taken effect (its last attempt's outcome is "
                "unknown). Nothing was retried. Confirm the external outcome first, then retry with force=true, "
                "or roll the saga back.",
            )
        if not (decision := _policy.decide(tx, "retry", _policy.pinned_of(node), node=node)).allowed:
            tx.refuse(_policy.refusal(decision, f"retrying node {node.key or node.id}"))
            return node
        _reschedule(tx, node)
        if tx.saga.status == SagaStatus.RECOVERY_REQUIRED:
            tx.transition(tx.saga, SagaStatus.ACTIVE, event=E.SAGA_RESUMED, error=None)
    return node


def _reschedule(tx: Tx, node: Node) -> None:
    rejected = node.status == N.REJECTED
    approved = node.approvals.filter(status=ApprovalStatus.APPROVED).exists() and not rejected
    target = _graph.waiting_status(node, approved=approved)
    if target == N.BLOCKED:
        raise InvalidTransition(
            "DEPENDENCY_NOT_RETRYABLE",
            f"Node {node.key or node.id} still depends on a node that failed, was rejected or was compensated. "
            "Nothing was changed. Retry that dependency first.",
        )
    # dispatched_at cleared: a retried node runs on the next run request, not on a sweep's re-sent nudge.
    tx.transition(
        node,
        target,
        event=E.NODE_RETRIED,
        attempts=0,
        error=None,
        uncertain_outcome=False,
        next_attempt_at=None,
        dispatched_at=None,
    )
    if target == N.WAITING_APPROVAL:
        request_approval(tx, node, "retry")
    _graph.unblock_dependants(tx, node)
