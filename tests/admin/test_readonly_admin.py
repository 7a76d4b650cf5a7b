"""Saga state and audit evidence can be inspected in the admin but never edited there."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission, User
from django.test import Client

from audit.models import AuditEvent
from governance.identity.principal import Principal
from governance.models import OperatorProfile
from sagas import coordinator
from tests.contracts import http_contract, register
from tests.httpserver import RecordingHTTPServer


def _login(username: str, tenant: str | None, role: str = "admin", superuser: bool = True) -> Client:
    if superuser:
        user = User.objects.create_superuser(username, f"{username}@example.com", "pw")
    else:
        user = User.objects.create_user(username, password="pw", is_staff=True)
        user.user_permissions.add(*Permission.objects.filter(codename__startswith="view_"))
    if tenant is not None:
        OperatorProfile.objects.create(user=user, tenant_id=tenant, role=role)
    client = Client()
    assert client.login(username=username, password="pw")
    return client


@pytest.fixture
def staff_client(transactional_db: None) -> Client:
    """An admin of tenant acme (the operator persona's tenant)."""
    return _login("root", "acme")


def test_admin_changelists_list_the_rows_and_offer_no_add_button(
    staff_client: Client, operator: Principal, downstream: RecordingHTTPServer
):
    # given a saga with a checkpoint, an immediate step, a planned node and an approval request
    register(http_contract("charge", downstream.url))
    register(http_contract("wire", downstream.url, approval_required=True))
    saga = coordinator.saga_begin(actor=operator, metadata={"order": "1"})
    coordinator.saga_checkpoint(actor=operator, saga_id=saga.id, name="start")
    step = coordinator.saga_step_execute(actor=operator, saga_id=saga.id, action="charge", input={})
    node = coordinator.node_plan(actor=operator, saga_id=saga.id, action="wire", input={}, key="later")
    shown = {
        "sagas/saga": [str(saga.id), "ACTIVE"],
        "sagas/node": [str(node.id), "later", "WAITING_APPROVAL"],
        "sagas/step": [str(step.id), "COMPLETED"],
        "sagas/approval": ["PENDING", "later"],
        "sagas/checkpoint": ["start", "alice"],
        "audit/auditevent": ["SAGA_STARTED", "CHECKPOINT_CREATED", "APPROVAL_REQUESTED"],
    }
    for model, texts in shown.items():
        # when each list is opened
        html = staff_client.get(f"/admin/{model}/").content.decode()
        # then it lists the rows, and offers no way to add one
        assert all(text in html for text in texts), (model, [t for t in texts if t not in html])
        assert f'href="/admin/{model}/add/"' not in html, model


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


def test_admin_shows_only_the_operators_tenant(transactional_db: None, operator: Principal, outsider: Principal):
    # given sagas in two tenants and a viewer of the other tenant
    mine = coordinator.saga_begin(actor=operator)
    theirs = coordinator.saga_begin(actor=outsider)
    client = _login("gina", "globex", role="viewer", superuser=False)
    # when / then: the list holds only globex's saga, and acme's detail page does not exist for her
    listing = client.get("/admin/sagas/saga/").content.decode()
    assert str(theirs.id) in listing and str(mine.id) not in listing
    events = client.get("/admin/audit/auditevent/").content.decode()
    assert str(mine.id) not in events
    # acme's saga answers like a missing one
    assert client.get(f"/admin/sagas/saga/{mine.id}/change/").status_code in (302, 404)


def test_staff_account_without_a_tenant_sees_nothing(transactional_db: None, operator: Principal):
    coordinator.saga_begin(actor=operator)
    client = _login("nobody", None, superuser=False)
    assert "0 sagas" in client.get("/admin/sagas/saga/").content.decode()
