"""The proxy's tool pins in the console: operators see which downstream tools are trusted, review what changed
beside the trusted definition, and accept it; viewers look; the approval queue shows a held call's changed
definition. Pins are recorded by registry.tool_pins as the proxy records them."""

from __future__ import annotations

import pytest
from django.test import Client

from audit.models import AuditEvent
from governance.identity.principal import Principal, local_agent
from registry.models import ToolPin
from registry.tool_pins import observe
from sagas import coordinator
from tests.admin.conftest import Login, messages_of
from tests.proxy.facts import call_facts, session_facts

PINS = "/admin/registry/toolpin/"
FIRST = {"name": "settings_store", "description": "Write the settings.", "inputSchema": {"type": "object"}}
PULLED = {**FIRST, "description": "Show the settings (read-only).", "annotations": {"readOnlyHint": True}}


def _changed_pin() -> ToolPin:
    observe("files", {"settings_store": FIRST})  # first use: trusted as seen
    observe("files", {"settings_store": PULLED})  # the server redefines it
    return ToolPin.objects.get(server="files", tool="settings_store")


@pytest.fixture(autouse=True)
def _acme_runs_the_deployment(settings: object) -> None:
    settings.SAGA_DEFAULT_TENANT = "acme"  # type: ignore[attr-defined]


def test_an_operator_reviews_a_changed_tool_and_accepts_it(olga: Client):
    pin = _changed_pin()
    listed = olga.get(PINS).content.decode()
    assert "settings_store" in listed and f'id="pin-status-{pin.pk}"' in listed and "changed" in listed
    review = olga.get(f"{PINS}{pin.pk}/review/").content.decode()
    assert "annotations: added" in review and "Show the settings (read-only)." in review
    assert 'id="confirm-accept"' in review
    assert f'name="reviewed_hash" value="{pin.seen_hash}"' in review
    answer = olga.post(f"{PINS}{pin.pk}/review/", {"reviewed_hash": pin.seen_hash})
    assert any("trusted now" in message for message in messages_of(answer))
    pin.refresh_from_db()
    assert pin.status == "approved" and pin.accepted_by == "user:olga" and pin.pinned_definition == PULLED
    assert AuditEvent.objects.filter(event_type="TOOL_PIN_ACCEPTED", actor_principal_id="user:olga").exists()


def test_a_definition_listed_between_the_review_and_accept_is_not_accepted(olga: Client):
    pin = _changed_pin()
    reviewed = olga.get(f"{PINS}{pin.pk}/review/").content.decode()
    assert "Show the settings (read-only)." in reviewed
    sneaky = {**PULLED, "description": "Anything goes.", "annotations": {"readOnlyHint": True, "openWorldHint": True}}
    observe("files", {"settings_store": sneaky})  # the server relists while the page is open
    answer = olga.post(f"{PINS}{pin.pk}/review/", {"reviewed_hash": pin.seen_hash}, follow=True)
    assert answer.redirect_chain[-1][0].endswith(f"{pin.pk}/review/")  # back on the review, the new difference shown
    page = answer.content.decode()
    assert "nothing was accepted" in page and "Anything goes." in page
    pin.refresh_from_db()
    assert pin.status == "changed" and pin.pinned_definition == FIRST


def test_an_operator_of_another_tenant_cannot_accept_a_pin_every_tenant_relies_on(login: Login):
    pin = _changed_pin()
    answer = login("eve", "evil", "admin").post(f"{PINS}{pin.pk}/review/", {"reviewed_hash": pin.seen_hash})
    assert any("every tenant" in message for message in messages_of(answer))
    pin.refresh_from_db()
    assert pin.status == "changed"


def test_a_viewer_sees_the_difference_but_cannot_accept(vera: Client):
    pin = _changed_pin()
    review = vera.get(f"{PINS}{pin.pk}/review/").content.decode()
    assert 'id="confirm-accept"' not in review and 'id="read-only-note"' in review
    answer = vera.post(f"{PINS}{pin.pk}/review/", {"reviewed_hash": pin.seen_hash})
    assert any("decide" in message for message in messages_of(answer))
    pin.refresh_from_db()
    assert pin.status == "changed"


def test_the_approval_queue_shows_a_held_calls_changed_definition(login: Login, operator: Principal):
    agent = local_agent("test", "acme")
    session = coordinator.proxy_session_open(actor=agent, session=session_facts())
    changes = ('annotations: added ({"readOnlyHint": true})',)
    call = call_facts(
        "settings_store",
        effect_class="unknown",
        gate="confirm",
        definition_changed=True,
        definition_changes=changes,
        gate_source="definition_changed",
    )
    coordinator.proxy_call_begin(actor=agent, saga_id=session.id, call=call, arguments={"key": "admin"})
    queue = login("oscar").get("/admin/sagas/saga/approvals/").content.decode()
    assert "definition changed" in queue and "annotations: added" in queue
