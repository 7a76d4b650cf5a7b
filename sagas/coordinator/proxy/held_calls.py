"""Held proxied calls: a call whose gate is `confirm` (or that tenant policy sends for approval) waits for a person.

The call becomes a node of its session's saga, WAITING_APPROVAL with a PENDING approval in the same queue operators
already use (console, REST list_approvals, approve_saga_step, `semantic-saga approve`), bound to the snapshot's hash
(which pins the tool definition hash) and the digest of the exact arguments, and expiring at the confirm timeout.
The executor never claims such a node (sagas.coordinator.execution.node_attempts): the proxy holding the agent's request
does.

    approved (node READY)        -> proxy_call_release: node EXECUTING and its step EXECUTING (write-ahead), forward
    denied by an operator        -> node REJECTED (the session stays ACTIVE), then proxy_call_withdraw: step REFUSED
    confirm timeout              -> proxy_call_withdraw(why="timeout"): approval EXPIRED, node REJECTED, step REFUSED
    client disconnected          -> proxy_call_withdraw(why="disconnected"): approval REJECTED, node REJECTED, step
                                    REFUSED; a later approve is refused (NODE_NOT_WAITING_APPROVAL)
    its MCP task cancelled       -> proxy_call_withdraw(why="cancelled"): the same (sagas.protocols.proxy.held_tasks)
"""

from __future__ import annotations

import uuid
from typing import Any

from django.conf import settings
from django.utils import timezone

from audit.models import EventType as E
from governance.identity.principal import Principal
from governance.identity.rbac import EXECUTE, authorize
from sagas.coordinator import policy as _policy
from sagas.coordinator._actions import Pinned, is_proxied_action
from sagas.coordinator._guards import find_node
from sagas.coordinator._leases import RELEASED, LeaseRef, keep_alive, lease_deadline, let_go, worker_id
from sagas.coordinator._proxied_journal import KEPT_LEASES, Begun, refuse
from sagas.coordinator._tx import Tx, locked_saga
from sagas.coordinator.approvals import check_approvable, decide, request_approval
from sagas.coordinator.execution.attempts import new_step
from sagas.coordinator.proxy.contract import snapshot
from sagas.errors import InvalidInput, InvalidTransition
from sagas.models import Approval, Node
from sagas.proxied_facts import CallFacts
from sagas.selectors.approvals import input_digest
from sagas.selectors.proxy_sessions import PROXY_ACTION_PREFIX
from sagas.states import ApprovalStatus, NodeStatus, StepStatus

# A held call still open: waiting for a decision, or approved and about to be sent.
OPEN_HELD = (NodeStatus.WAITING_APPROVAL, NodeStatus.READY)
WHY = {
    "timeout": "nobody approved it within the confirm timeout, so it counts as denied",
    "disconnected": "the client disconnected while it waited, which cancels it",
    "cancelled": "the client cancelled its task while it waited, which withdraws it",
    "redefined": (
        "its server no longer offers the definition it was approved under (the tool changed after the approval), "
        "so the approval does not cover what would run; an operator may accept the new definition "
        "(semantic-saga pins), and the agent may then call again"
    ),
}
CODES = {
    "timeout": "CONFIRM_TIMEOUT",
    "disconnected": "CONFIRM_CANCELLED",
    "cancelled": "CONFIRM_CANCELLED",
    "redefined": "DEFINITION_CHANGED",
}


def hold(tx: Tx, pinned: Pinned, arguments: dict[str, Any], call: CallFacts, *, requested_by: str) -> Begun:
    """The held form of a call: a WAITING_APPROVAL node and its PENDING approval (keeping the snapshot it binds, so
    an approver sees the definition and a call whose proxy is gone can still be journaled). A call held on an open
    request is leased to this process (held_as="request"). Audit NODE_PLANNED, APPROVAL_REQUESTED.

    A principal whose sessions already hold SAGA_PROXY_MAX_HELD_CALLS calls gets a REFUSED step (HELD_CALLS_LIMIT)
    instead: one agent must not fill the operators' queue, however many sessions it opens."""
    waiting = Node.objects.filter(
        saga__tenant_id=tx.saga.tenant_id,
        saga__creator_principal_id=tx.saga.creator_principal_id,
        step__isnull=True,
        action__startswith=PROXY_ACTION_PREFIX,
        status__in=OPEN_HELD,
    ).count()
    if waiting >= settings.SAGA_PROXY_MAX_HELD_CALLS:
        reason = (
            f"{waiting} calls of {tx.saga.creator_principal_id} already wait for a person (SAGA_PROXY_MAX_HELD_CALLS "
            f"is {settings.SAGA_PROXY_MAX_HELD_CALLS}, over all its sessions), and a person decides those first"
        )
        told, audit = call.gate_facts(), call.audit_facts()
        return refuse(tx, pinned, arguments, code="HELD_CALLS_LIMIT", reason=reason, facts=told, audit=audit)
    node = Node(
        saga=tx.saga,
        key=f"proxy-call-{tx.saga.next_position}",
        position=tx.saga.next_position,
        action=pinned.action,
        action_version=pinned.version,
        action_definition_hash=pinned.definition_hash,
        input=arguments,
        status=NodeStatus.WAITING_APPROVAL,
        approval_required=True,
    )
    if call.held_as == "request":
        node.lease_owner = worker_id()
        node.lease_expires_at = lease_deadline()
    node.save(force_insert=True)
    tx.update(tx.saga, next_position=tx.saga.next_position + 1)
    tx.record(E.NODE_PLANNED, node=node, status=node.status, data={"key": node.key, **call.audit_facts()})
    approval = request_approval(
        tx, node, requested_by, expires_in=call.confirm_timeout_seconds, snapshot=pinned.definition
    )
    facts = {**call.gate_facts(), "approval_id": str(approval.id), "call_id": str(node.id)}
    return Begun("held", str(tx.saga.id), node_id=str(node.id), facts=facts)


def proxy_call_release(
    *, actor: Principal, saga_id: object, node_id: object, call: CallFacts, arguments: dict[str, Any]
) -> Begun:
    """Start an approved held call: the node READY after its approval becomes EXECUTING under a fresh lease, with its
    step EXECUTING, before the proxy forwards it. The approval must bind this snapshot and these exact arguments.
    A kill switch engaged meanwhile refuses it (step REFUSED, node FAILED). Audit STEP_STARTED."""
    authorize(actor, EXECUTE, "execute")
    pinned = snapshot(call)
    _stop_keeping(node_id)
    with locked_saga(saga_id, actor) as tx:
        node = _held_node(tx, node_id)
        if node.status != NodeStatus.READY:
            raise InvalidTransition(
                "PROXIED_CALL_NOT_APPROVED",
                f"The held call {node.id} is {node.status}, not approved; nothing was sent.",
            )
        if not _binds(node, pinned, arguments):
            return _end(tx, node, pinned, arguments, call, "APPROVAL_NOT_BINDING", "its approval binds another call")
        if stop := _policy.kill_switch_stop(tx, f"calling {call.tool} on {call.server}", node):
            return _end(tx, node, pinned, arguments, call, "KILL_SWITCH_ENGAGED", stop.message)
        fence = node.fence_token + 1
        tx.transition(
            node,
            NodeStatus.EXECUTING,
            fence_token=fence,
            attempts=1,
            lease_owner=worker_id(),
            lease_expires_at=lease_deadline(),
        )
        step = new_step(tx, pinned, arguments, node, fence)
        tx.update(node, step=step)
        tx.record(E.STEP_STARTED, step=step, status=StepStatus.EXECUTING, data={"attempt": 1, **call.audit_facts()})
    begun = Begun("forward", str(tx.saga.id), step_id=str(step.id), node_id=str(node.id), fence=fence)
    KEPT_LEASES[step.id] = keep_alive(LeaseRef(Node, node.id, fence))
    return begun


def proxy_call_withdraw(
    *, actor: Principal, saga_id: object, node_id: object, why: str, call: CallFacts, arguments: dict[str, Any]
) -> Begun:
    """Journal a held call that will not be sent: denied by an operator (`why="denied"`, the node already
    REJECTED), timed out (`"timeout"`: approval EXPIRED) or cancelled by its client's disconnect
    (`"disconnected"`) or its MCP task's tasks/cancel (`"cancelled"`), the approval then REJECTED by the system.
    The node ends REJECTED and its step REFUSED."""
    authorize(actor, EXECUTE, "execute")
    if why not in ("denied", *WHY):
        raise InvalidInput(message="why must be denied, timeout, disconnected, cancelled or redefined.")
    pinned = snapshot(call)
    _stop_keeping(node_id)
    with locked_saga(saga_id, actor) as tx:
        node = _held_node(tx, node_id)
        if node.step_id is not None:  # already journaled (a second withdraw, or it ran): nothing more to say
            return Begun("refused", str(tx.saga.id), step_id=str(node.step_id), node_id=str(node.id))
        pending = node.approvals.filter(status=ApprovalStatus.PENDING).first()
        if pending is not None and node.status == NodeStatus.WAITING_APPROVAL:
            _close(tx, node, pending, why)
        # An operator who denied it first is what the refusal reports; otherwise (still pending, or approved but not
        # yet sent) this withdrawal's reason.
        operator_first = pending is None and node.status == NodeStatus.REJECTED
        code, reason = _refusal(node, "denied" if operator_first else why)
        return _end(tx, node, pinned, arguments, call, code, reason)


def proxy_call_client_decide(*, actor: Principal, saga_id: object, node_id: object, approved: bool) -> Node:
    """The person at the agent's client answered the proxy's elicitation for a held call (a channel the agent does
    not drive; sagas.protocols.proxy.elicited): approve or deny it, recorded as decided by `client:<principal>`.
    Only for a call whose gate asks the client (approvers client or both) and only by the principal whose session
    made it. The first decision wins: a call an operator decided already is refused (NODE_NOT_WAITING_APPROVAL)."""
    authorize(actor, EXECUTE, "answer for its client")
    with locked_saga(saga_id, actor) as tx:
        node = _held_node(tx, node_id)
        approval = node.approvals.filter(status=ApprovalStatus.PENDING).first()
        if node.status != NodeStatus.WAITING_APPROVAL or approval is None:
            raise InvalidTransition("NODE_NOT_WAITING_APPROVAL", f"The held call {node.id} was decided already.")
        if ((approval.snapshot or {}).get("proxy") or {}).get("approvers") not in ("client", "both"):
            raise InvalidInput(message=f"The held call {node.id} is decided by operators, not at its client.")
        if tx.saga.creator_principal_id != actor.principal_id:
            raise InvalidInput(message=f"The held call {node.id} belongs to another principal's session.")
        if approved:
            check_approvable(tx, node, approval, at_client=True)
        by = f"client:{actor.principal_id}"
        decide(tx, node, approval, approved=approved, reason="answered at the agent's client", decided_by=by)
    return node


def _close(tx: Tx, node: Node, approval: Approval, why: str) -> None:
    if why == "timeout":
        tx.transition(approval, ApprovalStatus.EXPIRED, event=E.APPROVAL_EXPIRED, decided_at=timezone.now())
    else:
        tx.transition(
            approval,
            ApprovalStatus.REJECTED,
            event=E.APPROVAL_REJECTED,
            decided_by="system:proxy",
            reason=WHY.get(why, why),
            decided_at=timezone.now(),
        )
    error = {"code": f"PROXIED_CALL_{why.upper()}", "message": WHY.get(why, why), "node_id": str(node.id)}
    tx.transition(node, NodeStatus.REJECTED, error=error)


def _refusal(node: Node, why: str) -> tuple[str, str]:
    if node.status == NodeStatus.BLOCKED:  # the session was rolled back (undone) while the call waited
        return "SESSION_UNDONE", "the session was undone (rolled back) by an operator before anyone decided it"
    if why in WHY:
        return CODES[why], WHY[why]
    decided = node.approvals.exclude(status=ApprovalStatus.PENDING).order_by("-decided_at").first()
    if decided is not None and decided.status == ApprovalStatus.EXPIRED:
        return "CONFIRM_TIMEOUT", WHY["timeout"]
    by = decided.decided_by if decided is not None else "an operator"
    if by.startswith("client:"):
        return "CONFIRM_DENIED", "the person at the agent's client declined it"
    return "CONFIRM_DENIED", f"{by} denied it"


def _end(
    tx: Tx, node: Node, pinned: Pinned, arguments: dict[str, Any], call: CallFacts, code: str, reason: str
) -> Begun:
    if node.status == NodeStatus.READY:
        tx.transition(node, NodeStatus.FAILED, event=E.NODE_FAILED, error={"code": code, "message": reason})
    if node.lease_owner:
        tx.update(node, **RELEASED)
    facts = {**call.gate_facts(), "call_id": str(node.id)}
    return refuse(tx, pinned, arguments, code=code, reason=reason, facts=facts, audit=call.audit_facts(), node=node)


def _stop_keeping(node_id: object) -> None:
    """This process no longer holds the call on an open request: its lease is let go (released or withdrawn)."""
    try:
        handle = KEPT_LEASES.pop(uuid.UUID(str(node_id)), None)
    except ValueError:
        return
    if handle is not None:
        let_go(handle)


def _held_node(tx: Tx, node_id: object) -> Node:
    node = find_node(tx, node_id)
    if not is_proxied_action(tx.saga, node.action):
        raise InvalidInput(message=f"Node {node.key or node.id} is not a held proxied call.")
    return node


def _binds(node: Node, pinned: Pinned, arguments: dict[str, Any]) -> bool:
    approval = node.approvals.filter(status=ApprovalStatus.APPROVED).order_by("-decided_at").first()
    return (
        approval is not None
        and approval.definition_hash == pinned.definition_hash == node.action_definition_hash
        and approval.input_digest == input_digest(arguments)
    )
