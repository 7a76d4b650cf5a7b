"""Approvals: request one for a node, decide it (approve or reject), expire it, and keep planners from approving
their own nodes (separation of duties: for every node when SAGA_APPROVAL_SEPARATION_OF_DUTIES is on, and always for
a call the MCP proxy holds, which the principal that made it may neither approve nor deny).

An approval's status changes only through the guarded transition (`Tx.transition`, table APPROVAL_TRANSITIONS in
sagas.states): PENDING -> APPROVED, REJECTED or EXPIRED, each terminal. An approval is bound to the node's pinned
definition hash and the digest of its input (sagas.selectors.approvals.input_digest), so it cannot be reused for
another contract or input. The reason text is stored on the approval only, never in the audit chain.
"""

from __future__ import annotations

from django.conf import settings
from django.utils import timezone

from audit import telemetry
from audit.models import AuditEvent
from audit.models import EventType as E
from governance.errors import Forbidden, ServiceError
from governance.identity.principal import Principal
from governance.identity.rbac import DECIDE, authorize
from sagas.coordinator import _graph, _held_calls_gone
from sagas.coordinator import policy as _policy
from sagas.coordinator._actions import is_proxied_action
from sagas.coordinator._approval_requests import request_approval as request_approval  # re-exported
from sagas.coordinator._deciders import not_a_person
from sagas.coordinator._guards import find_node, require_status
from sagas.coordinator._tx import Refusal, Tx, locked_saga
from sagas.errors import InvalidInput, InvalidTransition
from sagas.models import Approval, Node
from sagas.states import RECOVERABLE_SAGA_STATES, ApprovalStatus, NodeStatus, SagaStatus

MAX_REASON_CHARS = 4000


def node_approve(
    *, actor: Principal, saga_id: object, node_id: object, approved: bool = True, reason: str | None = None
) -> Node:
    """Decide a WAITING_APPROVAL node. Needs ACTIVE or RECOVERY_REQUIRED.

    Approve: approval APPROVED bound to the node's hash and input digest; node READY (a gated node waits for its
    dependencies first, so it is approvable only once they completed; one approved ahead by an older release goes to
    WAITING_DEPENDENCY); audit APPROVAL_GRANTED. Reject: approval REJECTED, node REJECTED, its dependants BLOCKED,
    saga RECOVERY_REQUIRED (retry re-requests approval, rollback unwinds); audit APPROVAL_REJECTED. The reason text
    is never audited. Errors: NODE_NOT_WAITING_APPROVAL; APPROVAL_EXPIRED (the request expired: it is recorded
    EXPIRED and counts as a rejection), SEPARATION_OF_DUTIES and POLICY_DENIED, each raised after its evidence
    committed.
    """
    if not isinstance(approved, bool):
        raise InvalidInput(message="approved must be true or false.")
    authorize(actor, DECIDE, "approve" if approved else "reject")
    if reason is not None and (not isinstance(reason, str) or len(reason) > MAX_REASON_CHARS):
        raise InvalidInput(message=f"reason must be a string of at most {MAX_REASON_CHARS} characters, or null.")
    with locked_saga(saga_id, actor) as tx:
        require_status(tx, RECOVERABLE_SAGA_STATES, "an approval decision")
        node = find_node(tx, node_id)
        approval = node.approvals.filter(status=ApprovalStatus.PENDING).first()
        if node.status != NodeStatus.WAITING_APPROVAL or approval is None:
            raise _not_waiting(node, proxied=is_proxied_action(tx.saga, node.action))
        if is_proxied_action(tx.saga, node.action) and _held_calls_gone.holder_gone(node):
            _held_calls_gone.abandon(tx, node)
            raise Refusal(
                InvalidTransition(
                    _held_calls_gone.HOLDER_GONE,
                    f"The held call {node.id} ({node.action.removeprefix('proxy.')}) cannot be decided any more: "
                    f"{_held_calls_gone.WHY_GONE}. Nothing was sent.",
                )
            )
        if is_proxied_action(tx.saga, node.action) and (refusal := _not_for_operators(node, approval)):
            raise refusal
        if approved:
            check_approvable(tx, node, approval)
        else:
            if is_proxied_action(tx.saga, node.action) and (conflict := _duty_conflict(tx, node)):
                raise conflict
            _policy.safety_override(tx, "reject", node)
        decide(tx, node, approval, approved=approved, reason=reason)
    return node


def _not_for_operators(node: Node, approval: Approval) -> ServiceError | None:
    """A held call whose gate rule says `approver: client` is decided by the person at the agent's client only."""
    if ((approval.snapshot or {}).get("proxy") or {}).get("approvers") != "client":
        return None
    return InvalidTransition(
        "DECIDED_AT_CLIENT",
        f"The held call {node.id} is decided by the person at the agent's MCP client (its gate rule says approver: "
        "client), who is asked by the proxy; an operator does not decide it. Nothing was changed. Change the rule "
        "to approver: both to let operators decide too.",
    )


def _not_waiting(node: Node, *, proxied: bool) -> InvalidTransition:
    # A held proxied call that ended says how (denied, timed out, its holder gone): the decider learns nothing ran.
    said = node.error.get("message") if proxied and isinstance(node.error, dict) else None
    ended = f" ({said})" if said else ""
    # "approval is not pending": semantic-saga-mcp's words for the same refusal, which its clients match on.
    later = (
        " Its approval becomes pending once its dependencies complete (run_ready_steps); decide it then."
        if node.status == NodeStatus.WAITING_DEPENDENCY
        else ""
    )
    return InvalidTransition(
        "NODE_NOT_WAITING_APPROVAL",
        f"Node {node.key or node.id} is {node.status}, not waiting for approval{ended}: its approval is not "
        f"pending. Nothing was changed.{later}",
    )


def check_approvable(tx: Tx, node: Node, approval: Approval, *, at_client: bool = False) -> None:
    """Raise the Refusal of an approval that cannot be granted now: expired, the planner's own (unless decided by
    the person at a proxied call's client, a channel the agent does not drive), or denied by policy."""
    if approval.expires_at and approval.expires_at <= timezone.now():
        raise Refusal(_expire(tx, node, approval))
    if not at_client and (conflict := _duty_conflict(tx, node)):
        raise Refusal(conflict)
    if not (decision := _policy.decide(tx, "approve", _policy.pinned_of(node), node=node)).allowed:
        raise Refusal(_policy.refusal(decision, f"approving node {node.key or node.id}"))


def decide(tx: Tx, node: Node, approval: Approval, *, approved: bool, reason: str | None, decided_by: str = "") -> None:
    """Record the decision (`decided_by`: the acting principal unless said otherwise) and move the node on."""
    decided = ApprovalStatus.APPROVED if approved else ApprovalStatus.REJECTED
    telemetry.count("saga.approvals", "Approval decisions", decision=str(decided).lower())
    tx.transition(
        approval,
        decided,
        event=E.APPROVAL_GRANTED if approved else E.APPROVAL_REJECTED,
        decided_by=decided_by or tx.actor.principal_id,
        reason=reason,
        decided_at=timezone.now(),
    )
    if approved:
        tx.transition(node, _graph.waiting_status(node, approved=True), event=E.NODE_READY)
    else:
        _reject(tx, node)


def _expire(tx: Tx, node: Node, approval: Approval) -> InvalidTransition:
    """An approval decided too late counts as a rejection: the work may no longer be wanted as planned. Returns the
    refusal to raise once the expiry is committed."""
    tx.transition(approval, ApprovalStatus.EXPIRED, event=E.APPROVAL_EXPIRED, decided_at=timezone.now())
    _reject(tx, node, code="APPROVAL_EXPIRED", why="its approval request expired before anyone decided")
    return InvalidTransition(
        "APPROVAL_EXPIRED",
        f"The approval request for node {node.key or node.id} expired at {approval.expires_at:%Y-%m-%d %H:%M:%S} "
        "UTC and counts as rejected; nothing ran and the saga waits in RECOVERY_REQUIRED. Retry the node to "
        "request a fresh approval, or roll the saga back.",
    )


def _duty_conflict(tx: Tx, node: Node) -> ServiceError | None:
    """Whoever planned a node may not approve it when separation of duties is on; a call the proxy holds is decided
    by a person other than whoever made it, through a surface agents do not drive (the agent must not approve what
    it asked for, nor through a second MCP server of its own)."""
    proxied = is_proxied_action(tx.saga, node.action)
    if proxied and (refusal := not_a_person(tx.actor, "decide a call the MCP proxy holds")):
        return refusal
    if not (proxied or settings.SAGA_APPROVAL_SEPARATION_OF_DUTIES):
        return None
    planner = (
        AuditEvent.objects.filter(saga_id=tx.saga.id, node_id=str(node.id), event_type=E.NODE_PLANNED)
        .values_list("actor_principal_id", flat=True)
        .first()
    )
    if planner != tx.actor.principal_id:
        return None
    if proxied:
        return Forbidden(
            "SEPARATION_OF_DUTIES",
            f"{tx.actor.principal_id} made the held call {node.id} ({node.action.removeprefix('proxy.')}) through "
            "the MCP proxy, and whoever made a held call may not decide it. Nothing was changed. Another person of "
            f"tenant {tx.saga.tenant_id} with the operator role decides it: in the console's approval queue "
            "(/admin/sagas/saga/approvals/), over REST with their own token (POST /api/v1/sagas/<saga>/nodes/<node>/"
            "approve/ or reject/), or with `semantic-saga approve|deny` at an interactive terminal.",
        )
    return Forbidden(
        "SEPARATION_OF_DUTIES",
        f"{tx.actor.principal_id} planned node {node.key or node.id} and so may not approve it (separation of "
        "duties). Nothing was changed. Ask another operator of your tenant to approve it.",
    )


def _reject(tx: Tx, node: Node, *, code: str = "APPROVAL_REJECTED", why: str = "its approval was rejected") -> None:
    proxied = is_proxied_action(tx.saga, node.action)
    then = (
        "nothing was sent; the agent may make the call again"
        if proxied
        else "Retry the node to request approval again, or roll the saga back"
    )
    error = {
        "code": code,
        "message": f"Node {node.key or node.id} did not run: {why}. {then}.",
        "node_id": str(node.id),
    }
    tx.transition(node, NodeStatus.REJECTED, error=error)
    _graph.block_dependants(tx, node, "a dependency's approval was rejected")
    # A denied proxied call is answered to its agent and the session goes on; a planned node's saga waits.
    if tx.saga.status == SagaStatus.ACTIVE and not proxied:
        tx.transition(tx.saga, SagaStatus.RECOVERY_REQUIRED, event=E.RECOVERY_REQUIRED, error=error)
