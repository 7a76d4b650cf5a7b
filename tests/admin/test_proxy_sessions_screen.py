"""The console's proxy session screens, through Django's test client: the list (client, principal, calls by status,
held calls, preview or live; filters and pages; the tenant's sessions only), the session page in the ledger's
terms, and the undo (dry run first, a confirmation, force only with a reason kept out of the audit chain, the role
checked again on a forged POST). Sessions are made through the coordinator as the proxy makes them; the calls here
need no downstream to be undone (a read is skipped, C listed, I has no way back)."""

from __future__ import annotations

import html
import re
from typing import Any

import pytest
from django.contrib.auth.models import Permission, User
from django.test import Client as ConsoleClient

from audit.models import AuditEvent
from governance.identity.principal import local_agent, local_principal
from governance.models import OperatorProfile
from sagas import coordinator
from sagas.console.sessions import SESSIONS_PER_PAGE
from sagas.models import Approval, Saga
from tests.approvals import console_operator, text_of
from tests.proxy.facts import answered, call_facts, session_facts

pytestmark = pytest.mark.django_db
AGENT = local_agent(protocol="test", tenant_id="acme")
OPERATOR = local_principal(protocol="test", tenant_id="acme")  # an agent may not commit its own session
LIST = "/admin/sagas/saga/proxy-sessions/"
CALLS = [("list_contacts", "read", {}), ("send_email", "C", {"to": "ada@example.com"}), ("pay", "I", {"amount": 3})]


def _session(client: str = "claude-code", calls: list[tuple[str, str, dict[str, Any]]] = CALLS, **facts: Any) -> Saga:
    session = coordinator.proxy_session_open(actor=AGENT, session=session_facts(client))
    for tool, effect_class, arguments in calls:
        call = call_facts(tool, effect_class=effect_class, **facts)
        begun = coordinator.proxy_call_begin(actor=AGENT, saga_id=session.id, call=call, arguments=arguments)
        if begun.outcome == "forward":
            outcome = answered(result={"structuredContent": {"ok": True}}, duration_ms=4.0)
            coordinator.proxy_call_finish(
                actor=AGENT, saga_id=session.id, step_id=begun.step_id, fence=begun.fence, outcome=outcome
            )
    return session


def _viewer(tenant: str = "acme") -> ConsoleClient:
    user = User.objects.create_user("victor", password="pw", is_staff=True)
    user.user_permissions.add(*Permission.objects.filter(codename__startswith="view_"))
    OperatorProfile.objects.create(user=user, tenant_id=tenant, role="viewer")
    console = ConsoleClient()
    assert console.login(username="victor", password="pw")
    return console


@pytest.fixture
def console() -> ConsoleClient:
    return console_operator("olga", "acme")


def test_the_list_shows_each_session_with_its_client_principal_and_calls(console: ConsoleClient) -> None:
    _session()
    page = text_of(console.get(LIST).content.decode())
    assert "claude-code" in page and "local-agent" in page and "live" in page
    assert "3 calls: 3 completed" in page and "ACTIVE" in page


def test_a_held_call_is_counted_as_waiting(console: ConsoleClient) -> None:
    held = _session(calls=[("send_email", "C", {"to": "ada@example.com"})], gate="confirm")
    html = console.get(LIST).content.decode()
    row = html[html.index(f'id="session-{held.id}"') :]
    assert "1 waiting" in text_of(row[: row.index("</tr>")])


def test_filters_by_client_state_and_server(console: ConsoleClient) -> None:
    first, second = _session("cursor"), _session("claude-code")
    coordinator.saga_commit(actor=OPERATOR, saga_id=second.id)
    assert str(first.id) in console.get(LIST, {"client": "cursor"}).content.decode()
    assert str(second.id) not in console.get(LIST, {"client": "cursor"}).content.decode()
    committed = console.get(LIST, {"state": "committed"}).content.decode()
    assert str(second.id) in committed and str(first.id) not in committed
    assert str(first.id) in console.get(LIST, {"server": "demo"}).content.decode()
    nothing = console.get(LIST, {"server": "github"}).content.decode()
    assert "No proxy session matches these filters" in nothing


def test_newest_first_in_pages(console: ConsoleClient) -> None:
    sessions = [_session(f"client-{n}", calls=[]) for n in range(SESSIONS_PER_PAGE + 1)]
    first = console.get(LIST).content.decode()
    assert str(sessions[-1].id) in first and str(sessions[0].id) not in first
    assert f"Page 1 of 2 ({SESSIONS_PER_PAGE + 1} sessions)" in text_of(first)
    assert str(sessions[0].id) in console.get(LIST, {"page": 2}).content.decode()


def test_another_tenants_sessions_are_neither_listed_nor_shown() -> None:
    theirs = _session()
    other = console_operator("omar", "globex")
    assert str(theirs.id) not in other.get(LIST).content.decode()
    assert other.get(f"/admin/sagas/saga/{theirs.id}/session/", follow=True).status_code == 404
    assert other.get(f"/admin/sagas/saga/{theirs.id}/session/undo/").status_code == 404


def test_the_session_page_speaks_the_ledgers_language(console: ConsoleClient) -> None:
    session = _session()
    page = text_of(console.get(f"/admin/sagas/saga/{session.id}/session/").content.decode())
    assert "list_contacts on demo" in page and "by its name" in page and "allow" in page
    assert "send_email on demo" in page and "plan: needs a decision" in page
    assert "plan: no way back" in page and "4ms" in page
    assert '"to": "ada@example.com"' in html.unescape(page)  # the arguments, as stored, on demand
    assert "OK" in page and "links chained" in page
    # the generic saga screen points here, and offers Undo instead of Roll back
    detail = text_of(console.get(f"/admin/sagas/saga/{session.id}/detail/").content.decode())
    assert "open it as the proxy's ledger" in detail and "Undo…" in detail and "Roll back…" not in detail


def test_a_plain_saga_has_no_session_page(console: ConsoleClient) -> None:
    saga = coordinator.saga_begin(actor=AGENT)
    answer = console.get(f"/admin/sagas/saga/{saga.id}/session/")
    assert answer.status_code == 302 and answer["Location"].endswith(f"/{saga.id}/detail/")


def test_the_saga_list_marks_proxy_sessions_and_links_their_page(console: ConsoleClient) -> None:
    session, saga = _session(), coordinator.saga_begin(actor=AGENT)
    html = console.get("/admin/sagas/saga/").content.decode()
    assert "proxy session" in text_of(html) and f"/admin/sagas/saga/{session.id}/session/" in html
    assert f"/admin/sagas/saga/{saga.id}/detail/" in html


def _plan(console: ConsoleClient, url: str, **options: str) -> str:
    """The digest of the plan the undo page shows (what a confirmation binds to)."""
    page = console.get(url, options).content.decode()
    found = re.search(r'name="plan" value="([0-9a-f]{64})"', page)
    assert found, "the undo page offers no confirmation"
    return found.group(1)


def test_the_undo_shows_the_dry_run_and_changes_nothing_until_confirmed(console: ConsoleClient) -> None:
    session = _session()
    url = f"/admin/sagas/saga/{session.id}/session/undo/"
    plan = text_of(console.get(url).content.decode())
    assert f"undo session {session.id} (dry run: nothing changed; newest first)" in plan
    assert "1 no way back, 1 needs a decision, 1 skipped; the session is ACTIVE" in plan
    refused = text_of(console.post(url, {"plan": _plan(console, url)}).content.decode())
    assert "Tick the confirmation" in refused
    session.refresh_from_db()
    assert session.status == "ACTIVE"


def test_a_call_made_after_the_plan_was_read_stops_the_undo_and_shows_the_new_plan(console: ConsoleClient) -> None:
    session = _session()
    url = f"/admin/sagas/saga/{session.id}/session/undo/"
    read = _plan(console, url)
    # the agent, still connected, makes one more call before the operator confirms
    call = call_facts("send_sms", effect_class="C")
    begun = coordinator.proxy_call_begin(actor=AGENT, saga_id=session.id, call=call, arguments={"to": "+1"})
    outcome = answered(duration_ms=2.0)
    coordinator.proxy_call_finish(
        actor=AGENT, saga_id=session.id, step_id=begun.step_id, fence=begun.fence, outcome=outcome
    )
    answer = text_of(console.post(url, {"confirm": "on", "plan": read}).content.decode())
    assert "The plan changed since you read it" in answer and "send_sms" in answer
    session.refresh_from_db()
    assert session.status == "ACTIVE"
    done = text_of(console.post(url, {"confirm": "on", "plan": _plan(console, url)}).content.decode())
    assert "2 needs a decision" in done and "the session is undone, 3 calls left" in done


def test_a_held_call_is_listed_withdrawn_and_its_approval_closed_by_the_undo(console: ConsoleClient) -> None:
    session = _session(calls=[("send_email", "C", {"to": "ada@example.com"})], gate="confirm")
    url = f"/admin/sagas/saga/{session.id}/session/undo/"
    plan = text_of(console.get(url).content.decode())
    assert "withdrawn" in plan and "held, never sent" in plan
    done = text_of(console.post(url, {"confirm": "on", "plan": _plan(console, url)}).content.decode())
    assert "1 withdrawn" in done and "the session is undone" in done
    approval = Approval.objects.get(node__saga=session)
    assert approval.status == "REJECTED" and approval.decided_by == "system:rollback"


def test_a_terminal_session_offers_no_undo_form(console: ConsoleClient) -> None:
    session = _session()
    coordinator.saga_commit(actor=OPERATOR, saga_id=session.id)
    page = console.get(f"/admin/sagas/saga/{session.id}/session/undo/").content.decode()
    assert 'id="undo-form"' not in page and "a committed session stays as it is" in text_of(page)


def test_force_needs_a_reason_which_is_kept_out_of_the_audit_chain(console: ConsoleClient) -> None:
    session = _session()
    url = f"/admin/sagas/saga/{session.id}/session/undo/"
    plan = _plan(console, url, force="on")
    for invisible in ("  ", "\u200b", "\t\u00a0"):
        asked = {"confirm": "on", "force": "on", "reason": invisible, "plan": plan}
        assert "needs a reason" in text_of(console.post(url, asked).content.decode())
    too_long = {"confirm": "on", "force": "on", "reason": "x" * 100_000, "plan": plan}
    assert "keep it to 2000" in text_of(console.post(url, too_long).content.decode())
    session.refresh_from_db()
    assert session.status == "ACTIVE"
    asked = {"confirm": "on", "force": "on", "reason": "ticket OPS-7", "plan": plan}
    done = text_of(console.post(url, asked).content.decode())
    assert "the session is undone, 2 calls left: send_email (needs a decision), pay (no way back)" in done
    session.refresh_from_db()
    asked = session.metadata["proxy"]["undo_requests"]
    assert [(a["force"], a["reason"], a["by"]) for a in asked] == [(True, "ticket OPS-7", "user:olga")]
    assert not any("OPS-7" in str(e.data) for e in AuditEvent.objects.filter(saga_id=session.id))
    page = text_of(console.get(f"/admin/sagas/saga/{session.id}/session/").content.decode())
    assert "forced" in page and "ticket OPS-7" in page


def test_a_viewer_sees_no_undo_and_a_forged_post_changes_nothing() -> None:
    session = _session()
    viewer = _viewer()
    page = viewer.get(f"/admin/sagas/saga/{session.id}/session/").content.decode()
    assert 'id="session-undo"' not in page
    forged = viewer.post(f"/admin/sagas/saga/{session.id}/session/undo/", {"confirm": "on", "plan": "x"}, follow=True)
    assert "may not" in text_of(forged.content.decode()) or "not allowed" in text_of(forged.content.decode())
    session.refresh_from_db()
    assert session.status == "ACTIVE"


def test_a_committed_session_offers_no_undo_and_says_why_when_asked(console: ConsoleClient) -> None:
    session = _session()
    coordinator.saga_commit(actor=OPERATOR, saga_id=session.id)
    assert 'id="session-undo"' not in console.get(f"/admin/sagas/saga/{session.id}/session/").content.decode()
    answer = console.post(f"/admin/sagas/saga/{session.id}/session/undo/", {"confirm": "on"}, follow=True)
    assert "Nothing was undone" in text_of(answer.content.decode())
    session.refresh_from_db()
    assert session.status == "COMMITTED"
