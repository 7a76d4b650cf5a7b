"""The audit event admin: read-only, tenant-scoped, searchable on denormalized columns, filterable by type and saga."""

from __future__ import annotations

from django.test import Client

from audit.models import AuditEvent
from governance.identity.principal import Principal
from registry.defaults import register_defaults
from sagas import coordinator

EVENTS = "/admin/audit/auditevent/"


def test_add_change_and_delete_are_denied(olga: Client, operator: Principal):
    saga = coordinator.saga_begin(actor=operator)
    event = AuditEvent.objects.get(saga_id=saga.id)
    assert olga.get(f"{EVENTS}add/").status_code == 403
    assert olga.post(f"{EVENTS}{event.pk}/delete/", {"post": "yes"}).status_code == 403
    view = olga.post(f"{EVENTS}{event.pk}/change/", {"event_type": "FORGED"})
    assert view.status_code == 403
    event.refresh_from_db()
    assert event.event_type == "SAGA_STARTED" and AuditEvent.objects.count() == 1


def test_filter_by_saga_and_by_event_type(olga: Client, operator: Principal):
    first = coordinator.saga_begin(actor=operator)
    second = coordinator.saga_begin(actor=operator)
    coordinator.saga_checkpoint(actor=operator, saga_id=second.id, name="cp")
    by_saga = olga.get(EVENTS, {"saga_id": str(second.id)}).content.decode()
    assert str(second.id) in by_saga and str(first.id) not in by_saga
    by_type = olga.get(EVENTS, {"event_type": "CHECKPOINT_CREATED"}).content.decode()
    assert str(second.id) in by_type and str(first.id) not in by_type
    not_a_chain = olga.get(EVENTS, {"saga_id": "not-a-uuid"}).content.decode()
    assert "0 audit events" in not_a_chain and str(first.id) not in not_a_chain and str(second.id) not in not_a_chain


def test_search_on_denormalized_columns(olga: Client, operator: Principal):
    saga = coordinator.saga_begin(actor=operator)
    other = coordinator.saga_begin(actor=operator)
    found = olga.get(EVENTS, {"q": str(saga.id)}).content.decode()
    assert str(saga.id) in found and str(other.id) not in found
    by_actor = olga.get(EVENTS, {"q": "alice"}).content.decode()
    assert str(saga.id) in by_actor and str(other.id) in by_actor and "2 audit events" in by_actor
    nothing = olga.get(EVENTS, {"q": "no such thing"}).content.decode()
    assert "0 audit events" in nothing and str(saga.id) not in nothing


def test_other_tenants_events_are_not_listed_or_viewable(olga: Client, operator: Principal, outsider: Principal):
    theirs = coordinator.saga_begin(actor=outsider)
    event = AuditEvent.objects.get(saga_id=theirs.id)
    assert str(theirs.id) not in olga.get(EVENTS).content.decode()
    assert olga.get(f"{EVENTS}{event.pk}/change/").status_code in (302, 404)


def test_the_seeds_event_names_filter_and_are_shown(olga: Client, operator: Principal):
    # given a saga with a checkpoint and one that was rolled back
    kept = coordinator.saga_begin(actor=operator)
    coordinator.saga_checkpoint(actor=operator, saga_id=kept.id, name="cp")
    undone = coordinator.saga_begin(actor=operator)
    coordinator.saga_rollback(actor=operator, saga_id=undone.id)
    # when an auditor filters by semantic-saga-mcp's name for "rollback requested" or a name of ours
    by_seed = olga.get(EVENTS, {"event_type": "ROLLBACK_REQUESTED"}).content.decode()
    offered = olga.get(EVENTS).content.decode()
    unknown = olga.get(EVENTS, {"event_type": "NOT_A_NAME"}).content.decode()
    # then the matching events are listed with their seed name beside ours, and the seed's names are offered
    assert str(undone.id) in by_seed and str(kept.id) not in by_seed
    # and an event the seed names otherwise shows its name under ours
    register_defaults()
    coordinator.node_plan(
        actor=operator, saga_id=kept.id, action="create_text_file", input={"path": "p.txt", "content": "x"}
    )
    planned = olga.get(EVENTS, {"event_type": "WORKFLOW_NODE_PLANNED"}).content.decode()
    assert "NODE_PLANNED<br>" in planned and "WORKFLOW_NODE_PLANNED</small>" in planned
    assert "APPROVAL_DECIDED (semantic-saga-mcp)" in offered and "ACTION_COMPLETED (semantic-saga-mcp)" in offered
    assert str(kept.id) not in unknown and str(undone.id) not in unknown
