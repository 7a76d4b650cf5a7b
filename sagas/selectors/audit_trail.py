"""Evidence reads: a saga's audit events and the verdict on its hash chain.

Payload-free by construction: audit rows never hold inputs, results, secrets, checkpoint data or approval reasons.
"""

from __future__ import annotations

from typing import Any

from django.db.models import Q

from audit import seed_names
from audit.chain import verify_chain
from audit.models import AuditEvent
from governance.identity.principal import Principal
from governance.identity.rbac import READ, authorize
from sagas.errors import InvalidInput
from sagas.selectors.scope import tenant_saga
from sagas.states import NodeStatus

MAX_EVENTS = 5000


def bounded_limit(value: object, name: str, default: int, high: int) -> int:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= high:
        raise InvalidInput(message=f"{name} must be an integer from 1 to {high}, got {value!r}.")
    return value


# Stored as "" when absent (docs/audit_hash.md hashes them so); answered as null, as semantic-saga-mcp answers them.
_OPTIONAL_TEXT = ("action", "action_version", "step_id", "node_id", "status", "trace_id", "span_id")


def audit_event_to_dict(event: AuditEvent) -> dict[str, Any]:
    """One event as semantic-saga-mcp answers it, plus `seed_name` (its name for the event, audit.seed_names).

    Recompute `event_hash` from an answer with an absent field as "" and without `seed_name` (docs/audit_hash.md).
    """
    optional = {name: getattr(event, name) or None for name in _OPTIONAL_TEXT}
    return {
        "sequence": event.sequence,
        "id": str(event.id),
        # As semantic-saga-mcp's events carry it (a control-plane event: its chain's id, audit.control_plane).
        "saga_id": str(event.saga_id),
        "event_type": event.event_type,
        "seed_name": seed_names.seed_name(event.event_type, event.status, event.node_id),
        "actor_principal_id": event.actor_principal_id or None,
        "actor_type": event.actor_type or None,
        **optional,
        "data": event.data,
        "created_at": event.created_at_text,
        "previous_hash": event.previous_hash,
        "event_hash": event.event_hash,
    }


def saga_audit_events(
    *, actor: Principal, saga_id: object, limit: int | None = 500, event_types: list[str] | None = None
) -> dict[str, Any]:
    """The saga's audit events in chain order (oldest first), optionally of some types only."""
    authorize(actor, READ, "audit")
    saga = tenant_saga(actor, saga_id)
    events = AuditEvent.objects.filter(saga_id=saga.id).order_by("sequence")
    if event_types:
        events = events.filter(event_types_filter(event_types))
    rows = [audit_event_to_dict(e) for e in events[: bounded_limit(limit, "limit", 500, MAX_EVENTS)]]
    return {"saga_id": str(saga.id), "events": rows}


def event_types_filter(event_types: object) -> Q:
    """The events named by `event_types`, our names or semantic-saga-mcp's (audit.seed_names)."""
    if not isinstance(event_types, list) or not all(isinstance(t, str) for t in event_types):
        raise InvalidInput(message="event_types must be a list of event type names, e.g. ['STEP_COMPLETED'].")
    try:
        return seed_names.matching(event_types, NodeStatus.values)
    except ValueError as unknown:
        raise InvalidInput(message=str(unknown)) from None


def saga_verify_audit(*, actor: Principal, saga_id: object) -> dict[str, Any]:
    """Recompute the saga's hash chain: {saga_id, valid, events_checked, head_hash | failed_sequence}."""
    authorize(actor, READ, "verify_audit")
    saga = tenant_saga(actor, saga_id)
    return verify_chain(saga.id).as_dict()
