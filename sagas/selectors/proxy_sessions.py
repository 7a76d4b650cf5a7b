"""Reads of the MCP proxy's journal: which sagas are proxy sessions (and which one a SESSION argument names), what
was decided about a held call, and the held calls still waiting (`semantic-saga pending`). A proxy session is a saga
whose `metadata.proxy` is set; its proxied calls are steps (and, for held calls, nodes keyed `proxy-call-<n>`) whose
action starts with `proxy.` (docs/proxy.md, "How a call is journaled").
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db.models import QuerySet

from audit.models import AuditEvent, EventType
from governance.identity.principal import Principal
from governance.identity.rbac import READ, authorize
from sagas.errors import NotFound
from sagas.models import Approval, Node, Saga
from sagas.selectors.approval_requests import pending_approvals
from sagas.selectors.scope import parse_uuid, tenant_saga, tenant_sagas
from sagas.selectors.short_ids import resolve
from sagas.states import ApprovalStatus, NodeStatus, SagaKind

PROXY_ACTION_PREFIX = "proxy."
HELD_KEY_PREFIX = "proxy-call-"
LAST = "last"
# A held call not yet journaled, by its node's status: waiting for a decision, or approved and about to be sent.
HELD_STATUSES: dict[str, str] = {NodeStatus.WAITING_APPROVAL: "held", NodeStatus.READY: "approved"}


def proxy_sessions(actor: Principal) -> QuerySet[Saga]:
    """The tenant's proxy sessions, newest first (`last` is the first of them)."""
    authorize(actor, READ, "list")
    return tenant_sagas(actor).filter(kind=SagaKind.PROXY_SESSION).order_by("-created_at", "-id")


def proxy_session(*, actor: Principal, ref: str = LAST) -> Saga:
    """The session `ref` names: a saga id, a unique prefix or suffix of one (sagas.selectors.short_ids), or `last`
    (the tenant's newest proxy session). NotFound otherwise; InvalidInput for a short id naming several."""
    authorize(actor, READ, "get")
    if ref.strip().lower() == LAST:
        saga = proxy_sessions(actor).first()
        if saga is None:
            raise NotFound(
                "NO_PROXY_SESSION",
                "There is no proxy session yet. Route an MCP client through `semantic-saga proxy --config FILE` "
                "(or /proxy/mcp) and make a call; each client session is recorded as a saga.",
            )
        return saga
    if parse_uuid(ref) is None:  # a short id, or no id at all
        missing = NotFound(
            "PROXY_SESSION_NOT_FOUND",
            f"No proxy session of your tenant matches {ref!r}. `semantic-saga status` lists the sessions: name one "
            "by its id, a unique part of its start or end (8 characters are enough), or `last`.",
        )
        return resolve(proxy_sessions(actor), ref, noun="proxy session", missing=missing)
    saga = tenant_saga(actor, ref)
    if not saga.is_proxy_session:
        raise NotFound(
            "NOT_A_PROXY_SESSION",
            f"Saga {saga.id} is not a proxy session. `semantic-saga status` lists the sessions.",
        )
    return saga


def is_proxy_session(*, actor: Principal, saga_id: object) -> bool:
    """Whether `saga_id` is a proxy session of the actor's tenant (False for a missing one, or another tenant's:
    the caller's own lookup then says it is not found)."""
    authorize(actor, READ, "get")
    pk = parse_uuid(saga_id)
    return pk is not None and tenant_sagas(actor).filter(pk=pk, kind=SagaKind.PROXY_SESSION).exists()


def held_call_decision(*, actor: Principal, saga_id: object, node_id: object) -> dict[str, Any]:
    """What became of a held call: pending, approved (its node READY), denied, expired, or closed (it already has
    its step: it ran or was refused; `step_status`, `step_code` and `step_reason` say which)."""
    authorize(actor, READ, "get")
    saga = tenant_saga(actor, saga_id)
    parsed = parse_uuid(node_id)
    node = Node.objects.filter(saga=saga, pk=parsed, key__startswith=HELD_KEY_PREFIX).first() if parsed else None
    if node is None:
        raise NotFound("HELD_CALL_NOT_FOUND", f"No held call {node_id} in saga {saga.id}.")
    approval = node.approvals.order_by("-created_at").first()
    decided_by = approval.decided_by if approval else ""
    if node.step_id is not None:
        decision = "closed"
    elif node.status == NodeStatus.READY:
        decision = "approved"
    elif node.status == NodeStatus.WAITING_APPROVAL:
        decision = "pending"
    elif approval is not None and approval.status == ApprovalStatus.EXPIRED:
        decision = "expired"
    else:
        decision = "denied"
    found = {"decision": decision, "decided_by": decided_by, "status": node.status}
    if node.step is not None:  # what became of it: REFUSED (with why) or sent
        error = node.step.error or {}
        found.update(
            step_status=node.step.status, step_code=error.get("code", ""), step_reason=error.get("message", "")
        )
    return found


@dataclass(frozen=True)
class HeldCall:
    """One line of `semantic-saga pending`."""

    call_id: str  # the node id: approve ID / deny ID take it
    saga_id: str
    tool: str
    server: str
    effect_class: str
    arguments: dict[str, Any]
    requested_at: datetime
    definition_changed: bool = False  # the tool's definition is not the one the deployment pinned


def held_calls_pending(*, actor: Principal) -> list[HeldCall]:
    """The tenant's held proxied calls still waiting for a decision, oldest first."""
    authorize(actor, READ, "list_approvals")
    approvals = (
        pending_approvals(actor)
        .filter(node__key__startswith=HELD_KEY_PREFIX, node__action__startswith=PROXY_ACTION_PREFIX)
        .select_related("node")
        .order_by("created_at")
    )
    return [_held(approval) for approval in approvals]


def _held(approval: Approval) -> HeldCall:
    node = approval.node
    server, _, tool = node.action.removeprefix(PROXY_ACTION_PREFIX).partition(".")
    return HeldCall(
        call_id=str(node.id),
        saga_id=str(node.saga_id),
        tool=tool,
        server=server,
        effect_class=held_call_class(node),
        arguments=dict(node.input or {}),
        requested_at=approval.created_at,
        definition_changed=bool(((approval.snapshot or {}).get("proxy") or {}).get("definition_changed")),
    )


def held_call_definition(node: Node) -> dict[str, Any]:
    """The `proxy` section of the snapshot a held call's approval binds (class, gate, definition_changed and its
    changes); {} for a call held before approvals kept it."""
    approval = node.approvals.order_by("-created_at").first()
    return dict(((approval.snapshot if approval is not None else None) or {}).get("proxy") or {})


def held_call_class(node: Node) -> str:
    """A held call's class: in the audit of the node's planning (NODE_PLANNED data), kept payload-free."""
    data = (
        AuditEvent.objects.filter(saga_id=node.saga_id, node_id=str(node.id), event_type=EventType.NODE_PLANNED)
        .values_list("data", flat=True)
        .first()
    )
    return str((data or {}).get("class", "unknown"))


def held_call_node(*, actor: Principal, call_id: object) -> Node:
    """A held call of the actor's tenant by its id, a unique prefix of it or its last characters (as `pending` shows
    them: sagas.selectors.short_ids); another tenant's is reported missing. InvalidInput for a short id naming
    several held calls."""
    authorize(actor, READ, "get")
    missing = NotFound(
        "HELD_CALL_NOT_FOUND",
        f"No held call {call_id} in your tenant. `semantic-saga pending` lists the calls waiting for a decision.",
    )
    rows = held_calls_of_tenant(actor).select_related("saga")
    return resolve(rows, str(call_id), noun="held call", missing=missing)


def held_calls_of_tenant(actor: Principal) -> QuerySet[Node]:
    """Every held call of the actor's tenant, decided or not: the rows a short id is resolved among."""
    return Node.objects.filter(key__startswith=HELD_KEY_PREFIX, saga__tenant_id=actor.tenant_id)
