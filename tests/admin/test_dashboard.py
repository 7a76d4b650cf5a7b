"""The admin index is the operator dashboard: the tenant's sagas by status, what waits, and links to every screen."""

from __future__ import annotations

import re

from django.contrib.auth.models import User
from django.test import Client

from governance.identity.principal import Principal
from governance.kill_switch import kill_switch_engage
from governance.models import OperatorProfile
from sagas import coordinator
from tests.admin.conftest import Login, failed_saga, gated_saga
from tests.httpserver import RecordingHTTPServer


def _count(html: str, element_id: str) -> int:
    found = re.search(rf'id="{element_id}">(\d+)<', html)
    assert found, element_id
    return int(found.group(1))


def test_dashboard_counts_the_tenants_sagas_and_waiting_work(
    olga: Client, operator: Principal, outsider: Principal, downstream: RecordingHTTPServer
):
    # given in acme: a saga waiting for approval, one needing recovery, one committed; and a saga in globex
    gated_saga(operator, downstream)
    failed_saga(operator, downstream)
    done = coordinator.saga_begin(actor=operator)
    coordinator.saga_commit(actor=operator, saga_id=done.id)
    coordinator.saga_begin(actor=outsider)
    # when
    page = olga.get("/admin/")
    # then
    assert page.status_code == 200
    html = page.content.decode()
    assert _count(html, "count-total") == 3
    assert _count(html, "count-ACTIVE") == 1 and _count(html, "count-RECOVERY_REQUIRED") == 1
    assert _count(html, "count-COMMITTED") == 1 and _count(html, "count-ROLLED_BACK") == 0
    assert _count(html, "count-approvals") == 1 and _count(html, "count-recovery") == 1
    assert "Failed node (retries exhausted)" in html  # the oldest recovery item says why
    for link in ("approvals", "recovery", "sagas", "policy", "registry", "registry-diff", "audit", "kill-switch"):
        assert f'id="link-{link}"' in html
    assert 'id="nav-approvals"' in html  # the console links on every page


def test_dashboard_shows_an_engaged_kill_switch(olga: Client):
    admin = Principal("root", "acme", roles=frozenset({"admin"}), authenticated=True)
    kill_switch_engage(actor=admin, reason="incident 42")
    html = olga.get("/admin/").content.decode()
    assert 'id="kill-switch-banner"' in html and "incident 42" in html


def test_account_without_a_tenant_is_told_why_it_sees_nothing(login: Login):
    client = login("nobody", tenant=None)
    html = client.get("/admin/").content.decode()
    assert 'id="no-tenant"' in html and 'id="count-total"' not in html


def test_superuser_without_profile_gets_the_default_tenant_dashboard(settings: object):
    User.objects.create_superuser("root", "root@example.com", "pw")
    client = Client()
    client.login(username="root", password="pw")
    html = client.get("/admin/").content.decode()
    assert 'id="dashboard-tenant">Tenant default' in html
    assert not OperatorProfile.objects.exists()
