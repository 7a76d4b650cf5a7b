"""Issue 39, "the chain covers what undo acts on": a proxied call's arguments, result and captured state edited in the
database (as someone holding `semantic-saga.db` would, with SQL) are named by `semantic-saga verify` and refused by
`semantic-saga undo`, --force included, while an untouched session verifies and undoes. Real sessions: the official
mcp client through the journaled proxy with the demo pack, the demo world over Streamable HTTP as the downstream,
whose own call log shows which inverses were sent. Rows journaled before digests were kept are accepted as before."""

from __future__ import annotations

import json
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.db import connection
from django.utils import timezone

from audit.canonical import sha256_hex
from audit.chain import event_body
from audit.models import AuditEvent
from governance.identity.principal import local_principal
from sagas import coordinator
from sagas.coordinator import sagas_recover
from sagas.coordinator._journal_digests import JournalWrites
from sagas.coordinator._leases import let_go
from sagas.coordinator._proxied_journal import KEPT_LEASES
from sagas.models import Saga, Step
from sagas.proxied_facts import CallOutcome
from sagas.selectors.journal_digests import DIGESTS, digest
from sagas.selectors.proxy_ledger import ledger_rows
from tests.proxy.demo_session import Call, through_the_proxy, two_contacts, world
from tests.proxy.facts import call_facts, session_facts
from tests.proxy.harness import HttpDownstream
from tests.proxy.sagaz_user import AGENT, live_session
from tests.proxy.test_session_undo import _command as _run

pytestmark = pytest.mark.django_db(transaction=True)
CALLS: list[Call] = [
    ("create_contact", {"name": "Ada", "email": "ada@example.com"}),  # c-3; its inverse deletes the id it answered
    ("update_contact", {"id": "c-1", "email": "grace@new.example"}),  # its inverse writes the captured state back
    ("delete_contact", {"id": "c-2"}),  # its inverse creates the captured contact again
]
HEX = set("0123456789abcdef")


@pytest.fixture(autouse=True)
def _acme(settings: Any) -> None:
    settings.SAGA_DEFAULT_TENANT = "acme"  # the commands act as the local operator of the proxy's tenant


def _steps(session: Saga) -> dict[str, Step]:
    return {step.action.rsplit(".", 1)[-1]: step for step in Step.objects.filter(saga=session)}


def _edit(step: Step, column: str, value: Any) -> None:
    """Rewrite one JSON column of a step row with SQL, as someone holding the database file would."""
    cast = "::jsonb" if connection.vendor == "postgresql" else ""
    with connection.cursor() as cursor:
        pk = Step._meta.pk.get_db_prep_value(step.pk, connection)  # type: ignore[union-attr]
        table = Step._meta.db_table
        cursor.execute(f"UPDATE {table} SET {column} = %s{cast} WHERE id = %s", [json.dumps(value), pk])


def _verdicts(report: dict[str, Any]) -> list[tuple[str, str]]:
    return [(item["tool"], item["verdict"]) for item in report["items"]]


def _rollback_keys(demo: HttpDownstream) -> set[str]:
    return {
        str(call["idempotency_key"]) for call in world(demo)["calls"] if ":rollback" in str(call["idempotency_key"])
    }


def test_every_journaled_write_carries_digests_of_what_it_wrote_and_never_the_values():
    session = live_session()
    update = Step.objects.get(saga=session, action__endswith="update_contact")
    events = {
        event.event_type: event.data[DIGESTS]
        for event in AuditEvent.objects.filter(step_id=str(update.id))
        if DIGESTS in event.data
    }
    # the start holds what was journaled before the call, the outcome what was recorded after it
    assert set(events["STEP_STARTED"]) == {
        *("arguments", "result", "captured_state", "state_after", "error", "contract"),
        *("status", "uncertain_outcome"),
    }
    assert set(events["STEP_COMPLETED"]) == {"result", "captured_state", "state_after", "error", "status"}
    # the status and the uncertain flag as the transaction left them, in plain
    assert (events["STEP_STARTED"]["status"], events["STEP_STARTED"]["uncertain_outcome"]) == ("EXECUTING", False)
    assert events["STEP_COMPLETED"]["status"] == "COMPLETED"
    assert events["STEP_STARTED"]["arguments"] == digest(update.input)
    assert events["STEP_COMPLETED"]["captured_state"] == digest(
        {"pre_state": update.result["pre_state"], "pre_state_sha256": update.result["pre_state_sha256"]}
    )
    assert events["STEP_COMPLETED"]["state_after"] is None  # nothing was read after this call
    assert events["STEP_STARTED"]["contract"] == update.action_definition_hash
    # only digests: no argument, result or captured value is in the chain
    chained = json.dumps([event.data for event in AuditEvent.objects.filter(saga_id=session.id)])
    assert "new@example.com" not in chained and "old@example.com" not in chained
    hashed = {name: value for name, value in events["STEP_COMPLETED"].items() if name != "status"}
    assert all(set(value) <= HEX and len(value) == 64 for value in hashed.values() if value)


def test_digests_are_of_the_value_as_the_database_gives_it_back():
    # whole floats are read back as integers where a database renders them so (PostgreSQL's jsonb: 1e16)
    assert digest({"n": 1e16, "m": 2.0}) == digest({"n": 10**16, "m": 2}) != digest({"n": 10**16, "m": 2.5})
    assert digest((1, 2)) == digest([1, 2]) and digest({1: "a"}) == digest({"1": "a"})
    # values canonical JSON refuses but a JSON column keeps still have a digest
    assert len(digest({"x": float("nan"), "s": "\ud800"})) == 64


def test_rows_edited_in_the_database_are_named_by_verify_and_refused_by_undo(tmp_path: Path, demo_http: HttpDownstream):
    two_contacts(demo_http)
    session = through_the_proxy(tmp_path, demo_http, CALLS)
    calls = _steps(session)
    create, update, delete = calls["create_contact"], calls["update_contact"], calls["delete_contact"]
    # given someone with the database file points the create's inverse at Grace (c-1), plants an address in the
    # update's captured state, and changes the delete's arguments
    _edit(create, "result", {**create.result, "result": {**create.result["result"], "id": "c-1"}})
    planted = {**update.result["pre_state"], "email": "mallory@evil.example"}
    _edit(update, "result", {**update.result, "pre_state": planted})
    Step.objects.filter(pk=delete.pk).update(input={"id": "c-1"})
    # when verify runs: the chain itself still holds, and each edited field is named
    out, code = _run("verify", "--json")
    report = json.loads(out)
    assert code == 1 and report["valid"] is False and report["chain_valid"] is True
    edited = report["journal"]["edited"]
    assert [(e["seq"], e["tool"], e["field"]) for e in edited] == [
        (1, "demo/create_contact", "result"),
        (2, "demo/update_contact", "captured_state"),
        (3, "demo/delete_contact", "arguments"),
    ]
    assert {e["saga_id"] for e in edited} == {str(session.id)}
    assert "edited outside Semantic Saga" in edited[0]["message"] and "Restore the row" in edited[0]["message"]
    shown, code = _run("verify")
    assert code == 1
    assert "✗ call 2 (demo/update_contact), captured state: the row no longer matches what was journaled" in shown
    assert f"EDITED 3 field(s) of 3 call row(s) of session {session.id} no longer match the digests" in shown
    # and the dry run and the undo, even forced, refuse exactly those calls: nothing is sent for them
    dry, _ = _run("undo", "--dry-run", "--json")
    assert _verdicts(json.loads(dry)) == [
        (tool, "edited") for tool in ("delete_contact", "update_contact", "create_contact")
    ]
    undone, code = _run("undo", "--force", "--json")
    answer = json.loads(undone)
    assert code == 1 and answer["status"] == "ROLLBACK_FAILED"
    assert _verdicts(answer) == [(tool, "edited") for tool in ("delete_contact", "update_contact", "create_contact")]
    assert answer["items"][1]["detail"] == (
        "refused: its row was edited outside Semantic Saga (captured state); restore the row, then undo again"
    )
    assert "its journal row was edited" in answer["outcome"]["summary"]
    assert _rollback_keys(demo_http) == set()  # the downstream's own log: no inverse arrived
    contacts = world(demo_http)["contacts"]
    assert contacts["c-1"]["email"] == "grace@new.example" and "c-3" in contacts and "c-2" not in contacts
    errors = {step.action: step.compensation_error for step in Step.objects.filter(saga=session)}
    assert errors["proxy.demo.update_contact"]["code"] == "JOURNAL_ROW_EDITED"
    assert errors["proxy.demo.update_contact"]["fields"] == ["captured_state"]
    assert "--force included" in errors["proxy.demo.update_contact"]["message"]


def test_the_ledger_marks_an_edited_row(tmp_path: Path, demo_http: HttpDownstream):
    two_contacts(demo_http)
    session = through_the_proxy(tmp_path, demo_http, CALLS[:2])
    create = _steps(session)["create_contact"]
    _edit(create, "input", {"name": "Eve", "email": "eve@example.com"})
    lines = [json.loads(line) for line in _run("ledger", "--json")[0].splitlines()]
    marked = {line["tool"]: (line.get("journal_edited"), line["undo_plan"]["verdict"]) for line in lines}
    assert marked == {"create_contact": (["arguments"], "edited"), "update_contact": (None, "would_undo")}
    assert "completed (row edited)" in _run("ledger")[0]
    # The table's rows (plans=False): each still checked against its digests, no undo plan computed for any.
    actor = local_principal(protocol="cli", tenant_id="acme")
    table = {row.tool: row.extra for row in ledger_rows(actor=actor, saga=session, plans=False)}
    assert table == {"create_contact": {"journal_edited": ["arguments"]}, "update_contact": {}}


def test_an_untouched_session_verifies_and_undoes(tmp_path: Path, demo_http: HttpDownstream):
    before = two_contacts(demo_http)
    session = through_the_proxy(tmp_path, demo_http, CALLS)
    shown, code = _run("verify")
    events = AuditEvent.objects.filter(saga_id=session.id).count()
    assert code == 0
    assert shown.splitlines()[-1] == f"OK {events} link(s) chained; the rows of 3 call(s) match their digests"
    report = json.loads(_run("undo", "--json")[0])
    assert _verdicts(report) == [(tool, "undone") for tool in ("delete_contact", "update_contact", "create_contact")]
    assert world(demo_http)["contacts"] == before["contacts"]
    assert len(_rollback_keys(demo_http)) == 3


def test_rows_journaled_before_digests_were_kept_are_accepted_as_before(
    tmp_path: Path, demo_http: HttpDownstream, monkeypatch: pytest.MonkeyPatch
):
    # given a session journaled as before this change: its events carry no digests
    monkeypatch.setattr(JournalWrites, "stamped", lambda self, drafts, head: drafts)
    two_contacts(demo_http)
    session = through_the_proxy(tmp_path, demo_http, CALLS[1:2])
    assert not AuditEvent.objects.filter(saga_id=session.id, data__has_key=DIGESTS).exists()
    update = _steps(session)["update_contact"]
    _edit(update, "result", {**update.result, "pre_state": {**update.result["pre_state"], "name": "Grace H."}})
    # then verify has nothing to hold the row against and says so, and undo acts on the row as it reads
    shown, code = _run("verify")
    assert code == 0 and shown.splitlines()[-1].endswith("; 1 journaled before digests were kept, not checked")
    report = json.loads(_run("undo", "--json")[0])
    assert _verdicts(report) == [("update_contact", "undone")]
    assert world(demo_http)["contacts"]["c-1"]["name"] == "Grace H."


def test_undo_refuses_every_call_of_a_session_whose_chain_does_not_verify():
    # given a session whose chain someone rewrote (an event's data: where the digests are)
    session = live_session()
    event = AuditEvent.objects.filter(saga_id=session.id, event_type="STEP_COMPLETED").first()
    assert event is not None
    AuditEvent.objects.filter(pk=event.pk).update(data={**event.data, DIGESTS: {}})
    # when undone: no call is acted on, force or not, and each says why and what to do
    report = json.loads(_run("undo", "--dry-run", "--force", "--json")[0])
    assert {verdict for _, verdict in _verdicts(report)} == {"unverified"}
    assert f"its audit chain is broken at seq {event.sequence}" in report["items"][0]["detail"]
    answer, code = _run("undo", "--json")
    assert code == 1 and json.loads(answer)["status"] == "ROLLBACK_FAILED"
    codes = {(step.compensation_error or {}).get("code") for step in Step.objects.filter(saga=session)}
    assert codes == {"JOURNAL_CHAIN_BROKEN"}


def test_an_edited_contract_snapshot_is_named_too():
    # given the update's inverse rewritten in its stored snapshot (the contract's hash column left as it was)
    session = live_session()
    update = Step.objects.get(saga=session, action__endswith="update_contact")
    Step.objects.filter(pk=update.pk).update(action_definition={**update.action_definition, "compensation": {}})
    report = json.loads(_run("verify", "--json")[0])
    assert [(e["tool"], e["field"]) for e in report["journal"]["edited"]] == [("demo/update_contact", "contract")]


def test_a_value_the_coordinator_writes_later_is_covered_by_that_write():
    # given a call whose proxy died mid-call: the sweep writes its error (uncertain) long after it was journaled
    session = coordinator.proxy_session_open(actor=AGENT, session=session_facts("crash"))
    call = call_facts("update_contact", effect_class="R")
    begun = coordinator.proxy_call_begin(actor=AGENT, saga_id=session.id, call=call, arguments={"id": "c-1"})
    let_go(KEPT_LEASES.pop(uuid.UUID(begun.step_id)))  # the process that kept the lease alive is gone
    Step.objects.filter(pk=begun.step_id).update(lease_expires_at=timezone.now() - timedelta(seconds=1))
    assert sagas_recover().steps_recovered == 1
    # then the error the sweep wrote is what the chain holds, and the row verifies
    recovered = AuditEvent.objects.get(step_id=begun.step_id, event_type="STEP_RECOVERED")
    error = digest(Step.objects.get(pk=begun.step_id).error)
    assert recovered.data[DIGESTS] == {"error": error, "status": "FAILED", "uncertain_outcome": True}
    shown, code = _run("verify")
    assert code == 0 and shown.splitlines()[-1].endswith("; the rows of 1 call(s) match their digests")


# The three ways around the digests an outside attacker found (7b, 7c, 7d), each as they did it: a failed create
# whose error answer named Grace (c-1), journaled with the demo world as the downstream, then its row edited in the
# database; and a completed call whose result and digest were rewritten, with the chain re-hashed by the public rule.


def _failed_create_naming_grace(demo: HttpDownstream) -> Step:
    """A create the downstream refused with an answer naming c-1: its inverse would delete Grace, so it is skipped."""
    session = coordinator.proxy_session_open(actor=AGENT, session=session_facts("attacker"))
    compensation = {"compensation": {"tool": "delete_contact", "arguments": {"id": "${result.id}"}}}
    server = {"transport": "streamable_http", "url": demo.url}
    call = call_facts("create_contact", effect_class="R", server_block=server, inverse=compensation)
    arguments = {"name": "Grace", "email": "grace@example.com", "id": "c-1"}
    begun = coordinator.proxy_call_begin(actor=AGENT, saga_id=session.id, call=call, arguments=arguments)
    refused = {"id": "c-1", "error": "contact c-1 already exists"}
    answer = {"content": [{"type": "text", "text": json.dumps(refused)}], "structuredContent": refused, "isError": True}
    outcome = CallOutcome(kind="answered", result=answer, is_error=True, duration_ms=2.0)
    coordinator.proxy_call_finish(
        actor=AGENT, saga_id=session.id, step_id=begun.step_id, fence=begun.fence, outcome=outcome
    )
    step = Step.objects.get(pk=begun.step_id)
    assert (step.status, step.uncertain_outcome, step.result["result"]["id"]) == ("FAILED", False, "c-1")
    return step


def _set(step: Step, column: str, value: Any) -> None:
    """Rewrite one plain column of a step row with SQL."""
    with connection.cursor() as cursor:
        pk = Step._meta.pk.get_db_prep_value(step.pk, connection)  # type: ignore[union-attr]
        cursor.execute(f"UPDATE {Step._meta.db_table} SET {column} = %s WHERE id = %s", [value, pk])


def _undo_refuses(step: Step, demo: HttpDownstream, code: str) -> dict[str, Any]:
    """Dry run, undo and forced undo (twice: a refusal must not launder the row) all refuse `step`; Grace stays."""
    dry = json.loads(_run("undo", "--dry-run", "--force", "--json")[0])
    assert [item["verdict"] for item in dry["items"]] == ["edited" if code == "JOURNAL_ROW_EDITED" else "unverified"]
    for args in (("undo", "--json"), ("undo", "--force", "--json")):
        answer, exit_code = _run(*args)
        assert exit_code == 1 and json.loads(answer)["status"] == "ROLLBACK_FAILED"
        assert (Step.objects.get(pk=step.pk).compensation_error or {}).get("code") == code
    assert _rollback_keys(demo) == set()  # the downstream's own log: no inverse arrived
    assert "c-1" in world(demo)["contacts"]
    return dry


def test_7b_a_failed_call_whose_status_was_edited_to_completed_is_named_and_refused(demo_http: HttpDownstream):
    two_contacts(demo_http)
    create = _failed_create_naming_grace(demo_http)
    _set(create, "status", "COMPLETED")  # as the attacker did: only the status column
    report = json.loads(_run("verify", "--json")[0])
    assert report["chain_valid"] is True and report["valid"] is False
    assert [(e["field"], e["found"], e["recorded"]) for e in report["journal"]["edited"]] == [
        ("status", "COMPLETED", "FAILED")
    ]
    shown, code = _run("verify")
    assert code == 1
    assert "✗ call 1 (demo/create_contact), status: the row says COMPLETED, the chain says FAILED" in shown
    _undo_refuses(create, demo_http, "JOURNAL_ROW_EDITED")
    assert Step.objects.get(pk=create.pk).compensation_error["fields"] == ["status"]
    # the refusal's own status write is not vouched for: verify still names the row until it is restored
    assert json.loads(_run("verify", "--json")[0])["journal"]["edited"][0]["recorded"] == "FAILED"


def test_7c_a_failed_call_marked_uncertain_is_named_and_refused(demo_http: HttpDownstream):
    two_contacts(demo_http)
    create = _failed_create_naming_grace(demo_http)
    _set(create, "uncertain_outcome", True)  # the attacker's `SET uncertain_outcome = 1`
    report = json.loads(_run("verify", "--json")[0])
    assert [(e["field"], e["found"], e["recorded"]) for e in report["journal"]["edited"]] == [
        ("uncertain_outcome", True, False)
    ]
    assert "uncertain outcome: the row says uncertain, the chain says not uncertain" in _run("verify")[0]
    _undo_refuses(create, demo_http, "JOURNAL_ROW_EDITED")


def _rehash_by_the_public_rule(session: Saga, step: Step, field: str, value: str) -> None:
    """Rewrite the newest digest of `field` of `step`, then every later event_hash and the session's head hash, by
    docs/audit_hash.md's keyless rule: what anyone who can write the database can do."""
    events = list(AuditEvent.objects.filter(saga_id=session.id).order_by("sequence"))
    target = max(e.sequence for e in events if e.step_id == str(step.id) and field in e.data.get(DIGESTS, {}))
    previous: str | None = None
    for event in events:
        if event.sequence == target:
            event.data = {**event.data, DIGESTS: {**event.data[DIGESTS], field: value}}
        if event.sequence >= target:
            event.previous_hash = previous
            event.event_hash = sha256_hex({"previous_hash": previous, "event": event_body(event)})
            AuditEvent.objects.filter(pk=event.pk).update(
                data=event.data, previous_hash=event.previous_hash, event_hash=event.event_hash
            )
        previous = event.event_hash
    Saga.objects.filter(pk=session.pk).update(audit_head_hash=previous)


def test_7d_a_result_edited_and_its_digest_rehashed_without_the_key_is_named_and_refused(
    tmp_path: Path, demo_http: HttpDownstream
):
    two_contacts(demo_http)
    session = through_the_proxy(tmp_path, demo_http, CALLS[:1])  # Ada, c-3
    create = _steps(session)["create_contact"]
    edited = {**create.result, "result": {**create.result["result"], "id": "c-1"}}
    _edit(create, "result", edited)
    _rehash_by_the_public_rule(session, create, "result", digest(edited))
    report = json.loads(_run("verify", "--json")[0])
    assert report["chain_valid"] is True  # the keyless chain holds again: only the key tells
    fields = [e["field"] for e in report["journal"]["edited"]]
    assert report["valid"] is False and fields[0] == "digests_mac"
    shown, code = _run("verify")
    assert code == 1
    assert "✗ call 1 (demo/create_contact): the chain's digests were rewritten without this deployment's key" in shown
    _undo_refuses(create, demo_http, "JOURNAL_DIGESTS_FORGED")
    assert "c-3" in world(demo_http)["contacts"]


def test_a_rotated_secret_key_verifies_through_its_fallbacks(tmp_path: Path, demo_http: HttpDownstream, settings: Any):
    two_contacts(demo_http)
    through_the_proxy(tmp_path, demo_http, CALLS[1:2])
    old = settings.SECRET_KEY
    settings.SECRET_KEY, settings.SECRET_KEY_FALLBACKS = "a-new-key-" + "x" * 50, []
    report = json.loads(_run("verify", "--json")[0])
    assert {e["field"] for e in report["journal"]["edited"]} == {
        "digests_mac"
    }  # every keyed session reads as rewritten
    settings.SECRET_KEY_FALLBACKS = [old]
    assert _run("verify")[1] == 0
    report = json.loads(_run("undo", "--json")[0])
    assert _verdicts(report) == [("update_contact", "undone")]
