"""`semantic-saga undo`, `ledger`, `checkpoint` and `status` on a real session: the official mcp client drives the
demo world (Streamable HTTP) through the journaled proxy with the demo pack; undo runs the declared inverses with
`<step id>:rollback` keys and restores the world (a created contact deleted, an updated one restored from its
captured pre-state, a deleted one recreated under its id), lists the email as C and the transfer as I, and refuses
an inverse whose state drifted unless --force."""

from __future__ import annotations

import json
from io import StringIO
from pathlib import Path
from typing import Any

import anyio
import pytest
from django.core.management import call_command

from governance.identity.principal import local_principal
from sagas.management.terminal import Paint, colour_enabled
from sagas.models import Saga, Step
from sagas.operations.invoke import invoke
from sagas.operations.table import OPERATIONS
from sagas.protocols.proxy.runtime import journaled
from tests.proxy.agent import connect, text
from tests.proxy.conftest import EXAMPLES
from tests.proxy.demo_session import Call, command, direct, through_the_proxy, two_contacts, world
from tests.proxy.facts import call_facts
from tests.proxy.harness import HttpDownstream, config_file, serve_proxy

pytestmark = pytest.mark.django_db(transaction=True)
SESSION_CALLS: list[Call] = [
    ("get_contact", {"id": "c-1"}),
    ("create_contact", {"name": "Ada", "email": "ada@example.com"}),
    ("update_contact", {"id": "c-1", "email": "grace@new.example"}),
    ("delete_contact", {"id": "c-2"}),
    ("send_email", {"to": "ada@example.com", "subject": "Welcome", "body": "Hi"}),
    ("transfer_funds", {"from_account": "acc-payroll", "to_account": "acc-vendor", "amount": 500}),
]


@pytest.fixture(autouse=True)
def _acme(settings: Any) -> None:
    settings.SAGA_DEFAULT_TENANT = "acme"  # the commands act as the local operator of the proxy's tenant


def _verdicts(report: dict[str, Any]) -> list[tuple[str, str]]:
    return [(item["tool"], item["verdict"]) for item in report["items"]]


def test_undo_restores_the_world_and_lists_what_it_cannot_undo(tmp_path: Path, demo_http: HttpDownstream):
    before = two_contacts(demo_http)
    session = through_the_proxy(tmp_path, demo_http, SESSION_CALLS)
    # when
    report = json.loads(command("undo", "last", "--json"))
    # then newest first: the transfer has no way back, the email needs a decision, the rest is undone
    assert _verdicts(report) == [
        ("transfer_funds", "no_way_back"),
        ("send_email", "needs_decision"),
        ("delete_contact", "undone"),
        ("update_contact", "undone"),
        ("create_contact", "undone"),
        ("get_contact", "skipped"),
    ]
    after = world(demo_http)
    assert after["contacts"] == before["contacts"]  # Ada gone, Grace's email back, Alan back as c-2
    assert len(after["outbox"]) == 1 and after["accounts"]["acc-vendor"] == 500  # C and I stay done
    session.refresh_from_db()
    assert session.status == "ROLLED_BACK" and report["status"] == "ROLLED_BACK"
    # and every inverse carried its step's rollback key
    undone = Step.objects.filter(saga=session, status="COMPENSATED")
    keys = {call["idempotency_key"] for call in after["calls"]}
    assert {f"{step.id}:rollback" for step in undone} <= keys and undone.count() == 3


def test_a_dry_run_changes_nothing(tmp_path: Path, demo_http: HttpDownstream):
    two_contacts(demo_http)
    session = through_the_proxy(tmp_path, demo_http, SESSION_CALLS[1:3])
    before = world(demo_http)
    report = json.loads(command("undo", str(session.id), "--dry-run", "--json"))
    assert _verdicts(report) == [("update_contact", "would_undo"), ("create_contact", "would_undo")]
    assert report["items"][0]["inverse"] == {
        "tool": "update_contact",
        "arguments": {"id": "c-1", "name": "Grace", "email": "grace@example.com"},
    }
    assert world(demo_http)["contacts"] == before["contacts"]
    session.refresh_from_db()
    assert session.status == "ACTIVE"


def test_drift_refuses_that_inverse_only_and_force_applies_it(tmp_path: Path, demo_http: HttpDownstream):
    before = two_contacts(demo_http)
    calls: list[Call] = [
        ("create_contact", {"name": "Ada", "email": "ada@example.com"}),
        ("update_contact", {"id": "c-1", "name": "Grace H."}),
    ]
    through_the_proxy(tmp_path, demo_http, calls)
    # given someone changes the contact behind the proxy's back
    direct([("update_contact", {"id": "c-1", "email": "grace@elsewhere.example"})], demo_http)
    # when undone without --force
    out = StringIO()
    with pytest.raises(SystemExit) as exited:
        call_command("undo", "--json", stdout=out)
    # then the update's inverse is refused, and only it: the create touched another contact and is undone
    report = json.loads(out.getvalue())
    assert exited.value.code == 1
    assert _verdicts(report) == [("update_contact", "drifted"), ("create_contact", "undone")]
    assert "email changed since the call" in report["items"][0]["detail"]
    assert world(demo_http)["contacts"]["c-1"]["email"] == "grace@elsewhere.example"
    assert "c-3" not in world(demo_http)["contacts"]
    assert report["status"] == "ROLLBACK_FAILED" == Saga.objects.get(metadata__has_key="proxy").status
    assert report["outcome"]["state"] == "undo_stopped"
    assert "update_contact (changed outside the session)" in report["outcome"]["summary"]
    # and with --force the captured values are written back
    shown = command("undo", "--force")
    assert "1 undone, 1 already undone\nthe session is undone" in shown
    assert world(demo_http)["contacts"] == before["contacts"]


def test_the_tables_rollback_of_a_proxy_session_undoes_it_the_same_way(tmp_path: Path, demo_http: HttpDownstream):
    before = two_contacts(demo_http)
    session = through_the_proxy(tmp_path, demo_http, SESSION_CALLS)
    # when the saga's rollback operation (the console's button, REST, MCP) is invoked on the session
    answer = invoke(OPERATIONS["rollback_saga"], local_principal(tenant_id="acme"), {"saga_id": str(session.id)})
    # then the inverses ran, and the email and the transfer are left as they are instead of failing the rollback
    assert answer["status"] == "ROLLED_BACK"
    assert world(demo_http)["contacts"] == before["contacts"]
    assert Step.objects.filter(saga=session, status="COMPENSATED").count() == 3
    assert not Step.objects.filter(saga=session, status="COMPENSATION_FAILED").exists()


def test_undo_to_a_checkpoint_keeps_what_came_before(tmp_path: Path, demo_http: HttpDownstream):
    two_contacts(demo_http)
    calls: list[Call] = [
        ("create_contact", {"name": "Ada", "email": "ada@example.com"}),
        ("create_contact", {"name": "Lin", "email": "lin@example.com"}),
    ]
    through_the_proxy(tmp_path, demo_http, calls, checkpoint="after-ada")
    report = json.loads(command("undo", "--to", "after-ada", "--json"))
    assert _verdicts(report) == [("create_contact", "undone")] and report["checkpoint"] == "after-ada"
    names = [contact["name"] for contact in world(demo_http)["contacts"].values()]
    assert names == ["Grace", "Alan", "Ada"]


def test_ledger_rows_json_and_filters(tmp_path: Path, demo_http: HttpDownstream):
    two_contacts(demo_http)
    session = through_the_proxy(tmp_path, demo_http, SESSION_CALLS)
    # the table: one line per call with its class and status, no colour in a buffer
    shown = command("ledger")
    lines = shown.splitlines()
    assert lines[0].startswith(f"session {session.id}")
    assert lines[1].split() == ["seq", "tool", "server", "class", "status", "duration", "result", "id"]
    rows = [line.split() for line in lines[3:-1]]
    assert [(row[1], row[3], row[4]) for row in rows] == [
        ("get_contact", "read", "completed"),
        ("create_contact", "R", "completed"),
        ("update_contact", "R", "completed"),
        ("delete_contact", "R", "completed"),
        ("send_email", "C", "completed"),
        ("transfer_funds", "I", "completed"),
    ]
    assert lines[-1] == "6 call(s); the session is ACTIVE" and "\033[" not in shown
    # NDJSON: one object a line, with the full step id
    objects = [json.loads(line) for line in command("ledger", "--json").splitlines()]
    assert [o["seq"] for o in objects] == [1, 2, 3, 4, 5, 6] and objects[1]["class"] == "R"
    assert Step.objects.get(pk=objects[1]["id"]).saga_id == session.id and objects[1]["result_bytes"] > 0
    # filters
    assert [json.loads(x)["tool"] for x in command("ledger", "--json", "--tool", "send_email").splitlines()] == [
        "send_email"
    ]
    assert command("ledger", "--json", "--status", "refused") == ""
    # and status sums it up
    status = command("status")
    assert str(session.id) in status and "6 completed" in status and "overall: ok" in status


def test_colour_only_on_a_terminal_and_never_with_no_color(monkeypatch: pytest.MonkeyPatch):
    class Terminal(StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.delenv("NO_COLOR", raising=False)
    assert colour_enabled(Terminal()) and not colour_enabled(StringIO())
    assert Paint(True)("I", "red") == "\033[31mI\033[0m" and Paint(False)("I", "red") == "I"
    monkeypatch.setenv("NO_COLOR", "1")
    assert not colour_enabled(Terminal())


def test_commands_without_a_session_say_what_to_do():
    with pytest.raises(Exception, match="There is no proxy session yet"):
        command("ledger")
    assert "No proxy session yet" in command("status")


def test_a_call_in_flight_refuses_the_undo_and_changes_nothing():
    actor = local_principal(tenant_id="acme")
    session = invoke(OPERATIONS["proxy_session_open"], actor, {"session": {"client": {"name": "t"}}})
    facts = call_facts("create_contact", effect_class="unknown").model_dump()
    begun = invoke(
        OPERATIONS["proxy_call_begin"], actor, {"saga_id": session["saga_id"], "call": facts, "arguments": {}}
    )
    assert begun["outcome"] == "forward"  # journaled EXECUTING, its lease kept alive by this process
    try:
        with pytest.raises(Exception, match=r"UNDO_BUSY: .* has a call in flight, so nothing was undone"):
            command("undo", session["saga_id"])
        assert Saga.objects.get(pk=session["saga_id"]).status == "ACTIVE"
    finally:
        finish = {"saga_id": session["saga_id"], "step_id": begun["step_id"], "outcome": {"kind": "not_sent"}}
        invoke(OPERATIONS["proxy_call_finish"], actor, finish)


def test_a_failed_capture_read_sends_nothing(tmp_path: Path, demo_http: HttpDownstream):
    two_contacts(demo_http)
    config = config_file(tmp_path, {"demo": {"url": demo_http.url}}, packs=[str(EXAMPLES / "demo_pack.json")])
    with serve_proxy(config, call_path=journaled) as served:

        async def session() -> Any:
            async with connect(served.url, "legacy") as client:
                return await client.call_tool("delete_contact", {"id": "c-404"})

        answer = anyio.run(session)
    # the capture (get_contact) found nothing, so the delete was never sent, and the agent is told so
    assert answer.is_error and "the capture read get_contact" in text(answer)
    assert "reconnects" not in text(answer) and "the same arguments will fail the same way" in text(answer)
    assert [call["tool"] for call in world(demo_http)["calls"]][-1] == "get_contact"
    step = Step.objects.get(action="proxy.demo.delete_contact")
    assert step.status == "FAILED" and step.error["sent"] is False and step.error["code"] == "CAPTURE_FAILED"
