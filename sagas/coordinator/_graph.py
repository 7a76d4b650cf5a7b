"""Dependency bookkeeping inside one saga transaction: promote, block and classify nodes."""

from __future__ import annotations

from audit.models import EventType as E
from sagas.coordinator import _ready_queries
from sagas.coordinator._tx import Tx
from sagas.models import Node, NodeDependency
from sagas.states import NodeStatus

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
    """Where a (re)planned node waits: approval first, then dependencies."""
    if node.approval_required and not approved:
        return NodeStatus.WAITING_APPROVAL
    state = dependency_state(node)
    if state == "met":
        return NodeStatus.READY
    return NodeStatus.BLOCKED if state == "broken" else NodeStatus.WAITING_DEPENDENCY


def _dependants(node: Node) -> list[Node]:
    return list(Node.objects.filter(dependency_links__depends_on=node).order_by("position"))


def promote_dependants(tx: Tx, node: Node) -> list[Node]:
    """After `node` COMPLETED: dependants whose dependencies are now all met become READY.

    One query finds them (waiting, with no dependency left that is not COMPLETED) and one statement promotes them
    all, however wide the fan-out.
    """
    ready = _ready_queries.dependants_now_ready(node)
    tx.transition_many(ready, NodeStatus.READY, event=E.NODE_READY)
    return ready


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
