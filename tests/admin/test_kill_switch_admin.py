"""The kill switch in the admin: tenant admins engage and release it through governance.kill_switch; others look."""

from __future__ import annotations

from django.test import Client

from audit.models import AuditEvent
from governance.identity.principal import Principal
from governance.kill_switch import kill_switch_engage
from governance.models import KillSwitch
from sagas import coordinator
from tests.admin.conftest import Login, messages_of

SWITCHES = "/admin/governance/killswitch/"


def test_tenant_admin_engages_and_releases_the_switch(login: Login, operator: Principal):
    # given an admin of acme and an active saga
    ada = login("ada", "acme", "admin")
    saga = coordinator.saga_begin(actor=operator)
    assert 'id="engage-kill-switch"' in ada.get(SWITCHES).content.decode()
    assert 'id="confirm-engage"' in ada.get(f"{SWITCHES}engage/").content.decode()
    # when she engages the tenant-wide switch
    answer = ada.post(f"{SWITCHES}engage/", {"saga_id": "", "reason": "incident 7"})
    assert answer["Location"] == SWITCHES and any("engaged for tenant acme" in m for m in messages_of(answer))
    switch = KillSwitch.objects.get()
    assert (switch.tenant_id, switch.saga_id, switch.engaged_by) == ("acme", None, "user:ada")
    # then the dashboard says so and forward work is refused
    assert 'id="kill-switch-banner"' in ada.get("/admin/").content.decode()
    refused = ada.post(f"/admin/sagas/saga/{saga.id}/do/run/")
    assert any("kill switch" in m.lower() for m in messages_of(refused))
    assert AuditEvent.objects.filter(saga_id=saga.id, event_type="KILL_SWITCH_REFUSED").exists()
    # when released
    assert 'id="confirm-release"' in ada.get(f"{SWITCHES}{switch.pk}/release/").content.decode()
    released = ada.post(f"{SWITCHES}{switch.pk}/release/")
    assert any("released" in m for m in messages_of(released))
    assert not KillSwitch.objects.exists()


def test_engage_needs_a_reason(login: Login):
    ada = login("ada", "acme", "admin")
    page = ada.post(f"{SWITCHES}engage/", {"reason": "   "})
    assert page.status_code == 200 and "This field is required" in page.content.decode()
    assert not KillSwitch.objects.exists()


def test_operator_and_viewer_see_but_cannot_engage_or_release(olga: Client, vera: Client):
    root = Principal("root", "acme", roles=frozenset({"admin"}), authenticated=True)
    switch = kill_switch_engage(actor=root, reason="incident 8")
    for client in (olga, vera):
        listing = client.get(SWITCHES).content.decode()
        assert "incident 8" in listing and 'id="engage-kill-switch"' not in listing
        assert 'id="confirm-engage"' not in client.get(f"{SWITCHES}engage/").content.decode()
        assert client.get(f"{SWITCHES}add/").status_code == 403
        forged = client.post(f"{SWITCHES}engage/", {"reason": "nope", "saga_id": ""})
        assert any("may not kill switch" in m for m in messages_of(forged))
        forged = client.post(f"{SWITCHES}{switch.pk}/release/")
        assert any("may not kill switch" in m for m in messages_of(forged))
    assert list(KillSwitch.objects.values_list("reason", flat=True)) == ["incident 8"]


def test_other_tenants_switch_is_not_listed_or_releasable(login: Login, outsider: Principal):
    switch = kill_switch_engage(actor=outsider, reason="globex only")
    ada = login("ada", "acme", "admin")
    assert "globex only" not in ada.get(SWITCHES).content.decode()
    assert ada.post(f"{SWITCHES}{switch.pk}/release/").status_code == 404
    assert KillSwitch.objects.filter(pk=switch.pk).exists()
