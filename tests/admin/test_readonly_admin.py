"""Saga state and audit evidence can be inspected in the admin but never edited there."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import Client

from audit.models import AuditEvent
from governance.identity import Principal
from sagas import coordinator


@pytest.fixture
def staff_client(transactional_db: None) -> Client:
    User.objects.create_superuser("root", "root@example.com", "pw")
    client = Client()
    client.login(username="root", password="pw")
    return client


@pytest.mark.parametrize("model", ["sagas/saga", "sagas/node", "sagas/step", "audit/auditevent"])
def test_admin_changelists_render(staff_client: Client, operator: Principal, model: str):
    saga = coordinator.saga_begin(actor=operator, metadata={"order": "1"})
    coordinator.saga_checkpoint(actor=operator, saga_id=saga.id, name="start")
    answer = staff_client.get(f"/admin/{model}/")
    assert answer.status_code == 200


def test_saga_detail_renders_read_only(staff_client: Client, operator: Principal):
    saga = coordinator.saga_begin(actor=operator)
    answer = staff_client.get(f"/admin/sagas/saga/{saga.id}/change/")
    assert answer.status_code == 200 and str(saga.id) in answer.content.decode()
    assert 'name="_save"' not in answer.content.decode()


def test_audit_events_cannot_be_deleted_or_added(staff_client: Client, operator: Principal):
    saga = coordinator.saga_begin(actor=operator)
    event = AuditEvent.objects.get(saga_id=saga.id)
    assert staff_client.get("/admin/audit/auditevent/add/").status_code == 403
    assert staff_client.post(f"/admin/audit/auditevent/{event.pk}/delete/", {"post": "yes"}).status_code == 403
    assert AuditEvent.objects.filter(pk=event.pk).exists()
