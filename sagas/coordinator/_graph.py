"""Dependency bookkeeping inside one saga transaction: promote, block and classify nodes."""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.utils import timezone

from audit.models import EventType as E
from sagas.coordinator._approval_requests import request_approval
from sagas.coordinator._tx import Tx
from sagas.coordinator.sql import statements
from sagas.models import Approval, Node, NodeDependency
from sagas.selectors.approvals import has_binding_approval
from sagas.states import ApprovalStatus, NodeStatus

# Dependency states that can never become COMPLETED without an explicit retry.
BROKEN_DEPENDENCY_STATES = frozenset(
    {NodeStatus.FAILED, NodeStatus.REJECTED, NodeStatus.BLOCKED, NodeStatus.COMPENSATED, NodeStatus.COMPENSATION_FAILED}
)


def dependency_state(node: Node) -> str:
    """'met' when every dependency COMPLETED, 'broken' when one cannot complete, else 'waiting'."""
    statuses = set(NodeDependency.objects.filter(node=node).values_list("depends_on__status", flat=True))
    if statuses & BROKEN_DEPENDENCY_STATES:
        return "broken"
    if statuses - {NodeStatus.COMPLETED}:
        return "waiting"
    return "met"


def waiting_status(node: Node, *, approved: bool) -> str:
    """Where a (re)planned node waits: dependencies first, then approval (as semantic-saga-mcp orders them: an
    approver decides about work that can run as soon as it is approved, so a node whose dependencies have not
    completed is not approvable yet; tests/seed_parity/test_seed_answers_workflow.py)."""
    state = dependency_state(node)
    if state == "broken":
        return NodeStatus.BLOCKED
    if state == "waiting":
        return NodeStatus.WAITING_DEPENDENCY
    return NodeStatus.WAITING_APPROVAL if node.approval_required and not approved else NodeStatus.READY


def _dependants(node: Node) -> list[Node]:
    return list(Node.objects.filter(dependency_links__depends_on=node).order_by("position"))


def promote_dependants(tx: Tx, node: Node) -> list[Node]:
    """After `node` COMPLETED: dependants whose dependencies are now all met become READY, or WAITING_APPROVAL
    when they are gated and hold no binding approval (their approval request is put to approvers now). Returns
    the READY ones.

    One query finds them (waiting, with no dependency left that is not COMPLETED) and one statement promotes the
    READY ones, however wide the fan-out.
    """
    met = statements.dependants_ready(node)
    gated = [n for n in met if n.approval_required and not has_binding_approval(n)]
    ready = [n for n in met if n not in gated]
    tx.transition_many(ready, NodeStatus.READY, event=E.NODE_READY)
    for waiting in gated:
        _await_approval(tx, waiting)
    return ready


def _await_approval(tx: Tx, node: Node) -> None:
    """The gated node now waits for its approver: the request made when it was planned counts its time to live
    from now (it could not be decided before), and a node without one (retried after a rejection) asks anew."""
    tx.transition(node, NodeStatus.WAITING_APPROVAL)
    pending = node.approvals.filter(status=ApprovalStatus.PENDING).first()
    if pending is None:
        request_approval(tx, node, "retry")
        return
    ttl = settings.SAGA_APPROVAL_TTL_SECONDS
    if ttl and pending.expires_at is not None:
        Approval.objects.filter(pk=pending.pk).update(expires_at=timezone.now() + timedelta(seconds=ttl))
    # The evidence of the moment the request became decidable (planning recorded when it was made).
    tx.record(
        E.APPROVAL_REQUESTED,
        node=node,
        status=ApprovalStatus.PENDING,
        data={"approval_id": str(pending.id), "requested_by": pending.requested_by, "dependencies_met": True},
    )


def block_dependants(tx: Tx, node: Node, reason: str) -> None:
    """After `node` cannot complete: every transitive dependant that has not started becomes BLOCKED."""
    pending = _dependants(node)
    seen: set[object] = set()
    while pending:
        dependant = pending.pop(0)
        if dependant.pk in seen:
            continue
        seen.add(dependant.pk)
        if dependant.status in (NodeStatus.WAITING_DEPENDENCY, NodeStatus.WAITING_APPROVAL, NodeStatus.READY):
            error = {"code": "DEPENDENCY_FAILED", "message": reason, "dependency": str(node.id)}
            tx.transition(dependant, NodeStatus.BLOCKED, event=E.NODE_BLOCKED, error=error)
            pending.extend(_dependants(dependant))


def unblock_dependants(tx: Tx, node: Node) -> None:
    """After `node` is retried: dependants it had blocked wait for it again."""
    for dependant in _dependants(node):
        if dependant.status == NodeStatus.BLOCKED and dependency_state(dependant) != "broken":
            tx.transition(dependant, NodeStatus.WAITING_DEPENDENCY, event=E.NODE_RETRIED, error=None)
            unblock_dependants(tx, dependant)
