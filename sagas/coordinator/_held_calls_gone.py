"""A held proxied call nobody is left to send: the proxy process keeping the agent's request open stopped (its lease
on the held node lapsed), or a 2026-07-28 client asked for its person's answer never came back before the confirm
timeout. It is withdrawn, whoever notices first: the recovery sweep, or an operator's approve (which is refused,
saying nothing ran and why).

    WAITING_APPROVAL -> node REJECTED, its PENDING approval REJECTED by `system:recovery` (EXPIRED when unclaimed)
    READY (approved, never sent) -> node FAILED
    either way -> a REFUSED step (HOLDER_GONE, or CONFIRM_TIMEOUT when unclaimed), journaled from the snapshot its
                  approval kept

A call held as an MCP task is neither: the task outlives its process (sagas.protocols.proxy.held_tasks).
"""

from __future__ import annotations

from django.utils import timezone

from audit.models import EventType as E
from sagas.coordinator._actions import Pinned
from sagas.coordinator._leases import RELEASED
from sagas.coordinator._proxied_journal import pinned_facts, refuse
from sagas.coordinator._tx import Tx
from sagas.models import Node
from sagas.states import ApprovalStatus, NodeStatus

HOLDER_GONE = "HOLDER_GONE"
WHY_GONE = (
    "the proxy process holding it stopped before it was sent (its lease lapsed), so it was withdrawn and nothing ran; "
    "the agent's request ended with that process, and the agent may make the call again if it is still wanted"
)
WHY_UNCLAIMED = (
    "nobody sent it within its confirm timeout: the agent's client, asked for its person's answer, did not come back "
    "for it; it counts as denied and nothing ran"
)
DECIDED_BY = "system:recovery"
# The held states a holder's lease covers: waiting for a decision, or approved and about to be sent.
HELD_STATES = (NodeStatus.WAITING_APPROVAL, NodeStatus.READY)


def holder_gone(node: Node) -> bool:
    """A held call on an open request whose holder stopped renewing its lease."""
    expires = node.lease_expires_at
    return (
        bool(node.lease_owner)
        and node.step_id is None
        and node.status in HELD_STATES
        and expires is not None
        and not hasattr(expires, "resolve_expression")  # a deadline just written as an expression is not lapsed
        and expires <= timezone.now()
    )


def abandon(tx: Tx, node: Node, *, unclaimed: bool = False) -> None:
    """Withdraw `node`, a held call whose holder is gone, or `unclaimed` after its confirm timeout (the table
    above)."""
    approval = node.approvals.order_by("-created_at").first()
    snapshot = dict(approval.snapshot or {}) if approval is not None else {}
    code, why = ("CONFIRM_TIMEOUT", WHY_UNCLAIMED) if unclaimed else (HOLDER_GONE, WHY_GONE)
    error = {"code": code, "message": why, "node_id": str(node.id)}
    if approval is not None and approval.status == ApprovalStatus.PENDING and unclaimed:
        tx.transition(approval, ApprovalStatus.EXPIRED, event=E.APPROVAL_EXPIRED, decided_at=timezone.now())
    elif approval is not None and approval.status == ApprovalStatus.PENDING:
        tx.transition(
            approval,
            ApprovalStatus.REJECTED,
            event=E.APPROVAL_REJECTED,
            decided_by=DECIDED_BY,
            reason=why,
            decided_at=timezone.now(),
        )
    if node.status == NodeStatus.WAITING_APPROVAL:
        tx.transition(node, NodeStatus.REJECTED, error=error)
    elif node.status == NodeStatus.READY:
        tx.transition(node, NodeStatus.FAILED, event=E.NODE_FAILED, error=error)
    tx.update(node, **RELEASED)
    told, audit = pinned_facts(snapshot.get("proxy", {}))
    pinned = Pinned(node.action, node.action_version, node.action_definition_hash, snapshot)
    refuse(tx, pinned, dict(node.input or {}), code=code, reason=why, facts=told, audit=audit, node=node)
