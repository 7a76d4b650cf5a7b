"""Reads: tenant-scoped saga lookups and listings. Another tenant's saga is indistinguishable from a missing one."""

from __future__ import annotations

import base64
import json
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from django.db.models import Exists, OuterRef, Q, QuerySet

from audit.chain import verify_chain
from audit.models import AuditEvent
from governance.identity.principal import Principal
from governance.identity.rbac import authorize
from governance.policy import engine as governance_policy
from sagas import shapes
from sagas.approval_context import waiting_contexts
from sagas.coordinator._tx import parse_uuid, tenant_sagas
from sagas.errors import InvalidInput, saga_not_found
from sagas.models import Approval, Node, Saga, Step
from sagas.states import ApprovalStatus, NodeStatus, SagaStatus


def saga_get(*, actor: Principal, saga_id: object) -> Saga:
    authorize(actor, "get")
    return _tenant_saga(actor, saga_id)


@dataclass(frozen=True)
class SagaPage:
    sagas: list[Saga]
    next_cursor: str | None


def encode_keyset_cursor(created_at: datetime, row_id: object) -> str:
    """An opaque page cursor for lists ordered by (created_at, id): saga lists and the approval queue."""
    raw = json.dumps([created_at.isoformat(), str(row_id)]).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_keyset_cursor(cursor: str, *, start: str) -> tuple[datetime, uuid.UUID]:
    """The (created_at, id) a cursor from encode_keyset_cursor carries; `start` says where omitting it begins."""
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        created, row_id = json.loads(raw)
        # Both parts are checked here: a forged cursor must be refused, never reach the query as garbage.
        return _aware(datetime.fromisoformat(created)), uuid.UUID(str(row_id))
    except (ValueError, TypeError, OverflowError) as exc:
        raise InvalidInput(
            message="cursor is not one this server issued. Pass next_cursor from a previous answer, or omit it to "
            f"start from {start}."
        ) from exc


def _aware(value: datetime) -> datetime:
    """A naive timestamp is taken as UTC; any offset is normalized to UTC (OverflowError at the calendar's edge)."""
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def _time_bound(value: datetime | None, name: str) -> datetime | None:
    if value is None:
        return None
    if not isinstance(value, datetime):
        raise InvalidInput(message=f"{name} must be an ISO 8601 timestamp such as 2025-01-31T12:00:00Z.")
    try:
        return _aware(value)
    except OverflowError as exc:
        raise InvalidInput(message=f"{name} is outside the supported range of timestamps (years 1 to 9999).") from exc


def saga_list(
    *,
    actor: Principal,
    status: str | None = None,
    limit: int = 50,
    cursor: str | None = None,
    created_after: datetime | None = None,
    created_before: datetime | None = None,
    action: str | None = None,
) -> SagaPage:
    """The actor's tenant's sagas, newest first, keyset-paginated (stable under concurrent inserts).

    Optional filters: `status`; `created_after` / `created_before` (exclusive bounds, naive values are UTC);
    `action`, the sagas having a planned node or a journal step with that action id.
    """
    authorize(actor, "list_sagas")
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= 500:
        raise InvalidInput(message=f"limit must be an integer from 1 to 500, got {limit!r}.")
    query = tenant_sagas(actor)
    if status is not None:
        if status not in SagaStatus.values:
            raise InvalidInput(message=f"status must be one of {', '.join(SagaStatus.values)}, got {status!r}.")
        query = query.filter(status=status)
    if (after := _time_bound(created_after, "created_after")) is not None:
        query = query.filter(created_at__gt=after)
    if (before := _time_bound(created_before, "created_before")) is not None:
        query = query.filter(created_at__lt=before)
    if action is not None:
        if not isinstance(action, str) or not action:
            raise InvalidInput(message="action must be a non-empty action id (list_actions shows them).")
        # EXISTS, not a join: a saga with many matching nodes or steps is still listed once.
        query = query.filter(
            Exists(Node.objects.filter(saga=OuterRef("pk"), action=action))
            | Exists(Step.objects.filter(saga=OuterRef("pk"), action=action))
        )
    if cursor:
        created, saga_id = decode_keyset_cursor(cursor, start="the newest saga")
        query = query.filter(Q(created_at__lt=created) | Q(created_at=created, id__lt=saga_id))
    rows = list(query.order_by("-created_at", "-id")[: limit + 1])
    more = len(rows) > limit
    rows = rows[:limit]
    return SagaPage(rows, encode_keyset_cursor(rows[-1].created_at, rows[-1].id) if more and rows else None)


# --- evidence reads (payload-free by construction: audit rows never hold inputs, results or secrets) -----------

MAX_EVENTS = 5000


def _limit(value: object, name: str, default: int, high: int) -> int:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= high:
        raise InvalidInput(message=f"{name} must be an integer from 1 to {high}, got {value!r}.")
    return value


def audit_event_to_dict(event: AuditEvent) -> dict[str, Any]:
    return {
        "sequence": event.sequence,
        "id": str(event.id),
        "event_type": event.event_type,
        "actor_principal_id": event.actor_principal_id,
        "actor_type": event.actor_type,
        "action": event.action,
        "action_version": event.action_version,
        "step_id": event.step_id,
        "node_id": event.node_id,
        "status": event.status,
        "data": event.data,
        "trace_id": event.trace_id,
        "span_id": event.span_id,
        "created_at": event.created_at_text,
        "previous_hash": event.previous_hash,
        "event_hash": event.event_hash,
    }


def saga_audit_events(
    *, actor: Principal, saga_id: object, limit: int | None = 500, event_types: list[str] | None = None
) -> dict[str, Any]:
    """The saga's audit events in chain order (oldest first), optionally of some types only."""
    authorize(actor, "audit")
    saga = _tenant_saga(actor, saga_id)
    events = AuditEvent.objects.filter(saga_id=saga.id).order_by("sequence")
    if event_types:
        if not isinstance(event_types, list) or not all(isinstance(t, str) for t in event_types):
            raise InvalidInput(message="event_types must be a list of event type names, e.g. ['STEP_COMPLETED'].")
        events = events.filter(event_type__in=event_types)
    rows = [audit_event_to_dict(e) for e in events[: _limit(limit, "limit", 500, MAX_EVENTS)]]
    return {"saga_id": str(saga.id), "events": rows}


def saga_verify_audit(*, actor: Principal, saga_id: object) -> dict[str, Any]:
    """Recompute the saga's hash chain: {saga_id, valid, events_checked, head_hash | failed_sequence}."""
    authorize(actor, "verify_audit")
    saga = _tenant_saga(actor, saga_id)
    return verify_chain(saga.id).as_dict()


def saga_timeline(*, actor: Principal, saga_id: object, limit: int | None = 1000) -> dict[str, Any]:
    """Steps, nodes, checkpoint names, approvals and audit events, without inputs, results, contract snapshots or
    checkpoint data, plus the chain's integrity. A waiting node's approval_context comes without its input preview."""
    authorize(actor, "timeline")
    saga = _tenant_saga(actor, saga_id)
    count = _limit(limit, "limit", 1000, MAX_EVENTS)
    nodes = list(saga.nodes.prefetch_related("approvals", "dependency_links").order_by("position"))
    contexts = waiting_contexts(nodes)
    events = AuditEvent.objects.filter(saga_id=saga.id).order_by("sequence")[:count]
    return {
        "saga": shapes.saga_summary(saga, payload=False),
        "steps": [shapes.step_to_dict(s, payload=False) for s in saga.steps.order_by("sequence")],
        "nodes": [shapes.node_to_dict(n, payload=False, contexts=contexts) for n in nodes],
        "checkpoints": [shapes.checkpoint_to_dict(c, payload=False) for c in saga.checkpoints.order_by("created_at")],
        "events": [audit_event_to_dict(e) for e in events],
        "integrity": verify_chain(saga.id).as_dict(),
    }


def _tenant_saga(actor: Principal, saga_id: object) -> Saga:
    parsed = parse_uuid(saga_id)
    saga = tenant_sagas(actor).filter(pk=parsed).first() if parsed else None
    if saga is None:
        raise saga_not_found(saga_id)
    return saga


def policy_status(*, actor: Principal, tenant_id: str | None = None) -> dict[str, Any]:
    """Governance status for the caller's tenant; another tenant's needs the admin capability."""
    authorize(actor, "policy_status")
    tenant = tenant_id or actor.tenant_id
    if tenant != actor.tenant_id:
        authorize(actor, "policy_status_other_tenant")
    return governance_policy.policy_status(tenant)


def pending_approvals(actor: Principal) -> QuerySet[Approval]:
    """The tenant's approval requests still waiting for a decision, on nodes still WAITING_APPROVAL (served by
    approval_status_created_idx). The console's queue and the REST approval list read through this one query."""
    return Approval.objects.filter(
        status=ApprovalStatus.PENDING, node__status=NodeStatus.WAITING_APPROVAL, node__saga__tenant_id=actor.tenant_id
    )
