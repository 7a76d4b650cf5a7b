"""An undo interrupted by a crash resumes as an undo, not as an ordinary rollback: a real `semantic-saga undo` is
killed (SIGKILL) while an inverse it sent is applied but unanswered (tests/proxy/held_demo_server.py holds the
answer), and `semantic-saga recover_sagas` resumes the walk: the inverse is sent again with its same
`<step id>:rollback` key, the world is restored, the email is listed as C and the transfer as I (UNDO_LISTED, not
failed), the session ends ROLLED_BACK, and the undo's --force and --to recorded at its start are honoured. The
console's rollback button and the saga's rollback operation list the same calls, and a registered action run in a
session is compensated by the same walk."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from django.db.models.functions import Now

from audit.models import AuditEvent
from governance.identity.principal import local_principal
from sagas import coordinator
from sagas.models import Saga, Step
from sagas.operations.invoke import invoke
from sagas.operations.table import OPERATIONS
from tests.admin.conftest import login  # noqa: F401  (the console's operator accounts)
from tests.contracts import http_contract, register
from tests.distributed.workers import free_port, shared_database_url
from tests.httpserver import RecordingHTTPServer
from tests.proxy.demo_session import Call, command, direct, through_the_proxy, two_contacts, world
from tests.proxy.harness import ROOT, HttpDownstream, wait_for_port
from tests.proxy.test_undo import SESSION_CALLS
from tests.sagas.helpers import idempotency_keys

pytestmark = pytest.mark.django_db(transaction=True)
BIN = Path(sys.executable).parent
HELD_SERVER = Path(__file__).with_name("held_demo_server.py")
WAIT_SECONDS = 60
LEASE_SECONDS = "3"  # the killed undo's lease lapses this long after its last heartbeat


@pytest.fixture(autouse=True)
def _acme(settings: Any) -> None:
    settings.SAGA_DEFAULT_TENANT = "acme"  # the commands act as the local operator of the proxy's tenant


class HeldDemo(HttpDownstream):
    """The demo world whose first create_contact inverse is applied, then left unanswered until released."""

    held_file: Path
    release_file: Path
    command: list[str]

    def start(self) -> HeldDemo:
        self.proc = subprocess.Popen(self.command, cwd=ROOT)
        wait_for_port(self.port, self.proc)
        return self


@pytest.fixture
def held_demo(tmp_path: Path) -> Iterator[HeldDemo]:
    server = HeldDemo(HELD_SERVER, free_port())
    server.held_file, server.release_file = tmp_path / "held", tmp_path / "release"
    server.command = [sys.executable, str(HELD_SERVER), "--port", str(server.port), "--hold", "create_contact"]
    server.command += ["--held-file", str(server.held_file), "--release-file", str(server.release_file)]
    try:
        yield server.start()
    finally:
        server.release_file.touch()
        server.stop()


def _poll(predicate: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + WAIT_SECONDS
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def _undo_killed_mid_inverse(demo: HeldDemo, session: Saga, *flags: str) -> Step:
    """Run `semantic-saga undo` in its own process, SIGKILL it while its first inverse is held; the held step."""
    env = {
        **os.environ,
        "DATABASE_URL": shared_database_url(),
        "SAGA_LEASE_SECONDS": LEASE_SECONDS,
        "SAGA_DEFAULT_TENANT": "acme",
    }
    undo = subprocess.Popen([str(BIN / "semantic-saga"), "undo", str(session.id), *flags], env=env, cwd=ROOT)
    try:
        _poll(lambda: demo.held_file.exists() or undo.poll() is not None, "the first inverse to be held")
        assert undo.poll() is None, f"the undo exited ({undo.returncode}) before its inverse was held"
        undo.send_signal(signal.SIGKILL)  # given: the undo dies with an inverse applied but unanswered
    finally:
        undo.wait(timeout=WAIT_SECONDS)
    step = Step.objects.get(pk=demo.held_file.read_text().removesuffix(":rollback"))
    assert step.status == "COMPENSATING" and Saga.objects.get(pk=session.pk).status == "ROLLING_BACK"
    _poll(lambda: Saga.objects.filter(pk=session.pk, lease_expires_at__lt=Now()).exists(), "the lease to lapse")
    return step


def _listed(session: Saga) -> dict[str, tuple[str, str]]:
    """The session's UNDO_LISTED events: tool -> (verdict, class)."""
    events = AuditEvent.objects.filter(saga_id=session.id, event_type="UNDO_LISTED").order_by("sequence")
    steps = {str(step.id): step.action.rsplit(".", 1)[-1] for step in Step.objects.filter(saga=session)}
    return {steps[e.step_id]: (e.data["verdict"], e.data["class"]) for e in events}


def _inverse_calls(demo: HttpDownstream, step: Step, tool: str) -> list[str]:
    """The idempotency keys of every `tool` call the world received on behalf of this step."""
    calls = world(demo)["calls"]
    return [
        c["idempotency_key"] for c in calls if c["tool"] == tool and str(c["idempotency_key"]).startswith(str(step.id))
    ]


def test_an_undo_killed_mid_inverse_is_resumed_by_the_sweep_as_an_undo(tmp_path: Path, held_demo: HeldDemo):
    before = two_contacts(held_demo)
    session = through_the_proxy(tmp_path, held_demo, SESSION_CALLS)
    held = _undo_killed_mid_inverse(held_demo, session)
    assert held.action == "proxy.demo.delete_contact"  # the newest R: its inverse recreates Alan as c-2
    # when the recovery sweep runs (as a restarted server's sweeper does)
    shown = command("recover_sagas")
    # then the walk resumed as an undo: the world is restored, and the email and the transfer are listed, not failed
    assert "rollbacks_started=1" in shown and "errors=0" in shown
    session.refresh_from_db()
    assert session.status == "ROLLED_BACK", session.error
    assert world(held_demo)["contacts"] == before["contacts"]
    assert _listed(session) == {"send_email": ("needs_decision", "C"), "transfer_funds": ("no_way_back", "I")}
    # (listed by the first run before it died; the resumed walk does not list them twice)
    assert AuditEvent.objects.filter(saga_id=session.id, event_type="UNDO_LISTED").count() == 2
    statuses = dict(Step.objects.filter(saga=session).values_list("action", "status"))
    assert statuses["proxy.demo.send_email"] == statuses["proxy.demo.transfer_funds"] == "COMPLETED"
    assert not Step.objects.filter(saga=session, status="COMPENSATION_FAILED").exists()
    # and the inverse in flight was sent again with the same key (the world applied it once)
    assert _inverse_calls(held_demo, held, "create_contact") == [f"{held.id}:rollback"] * 2
    assert AuditEvent.objects.filter(saga_id=session.id, event_type="ROLLBACK_RESUMED").count() == 1
    # and the undo report of the session shows the same listing
    report = json.loads(command("undo", str(session.id), "--dry-run", "--json"))
    assert [(i["tool"], i["verdict"]) for i in report["items"]] == [
        ("transfer_funds", "no_way_back"),
        ("send_email", "needs_decision"),
        ("delete_contact", "already_undone"),
        ("update_contact", "already_undone"),
        ("create_contact", "already_undone"),
        ("get_contact", "skipped"),
    ]


def test_a_resumed_undo_honours_its_force_and_its_checkpoint(tmp_path: Path, held_demo: HeldDemo):
    two_contacts(held_demo)
    calls: list[Call] = [
        ("create_contact", {"name": "Ada", "email": "ada@example.com"}),  # before the checkpoint: kept
        ("update_contact", {"id": "c-1", "name": "Grace H."}),
        ("delete_contact", {"id": "c-2"}),
    ]
    session = through_the_proxy(tmp_path, held_demo, calls, checkpoint="after-ada")
    kept = world(held_demo)["contacts"]["c-3"]
    # given someone changes Grace behind the proxy's back, and the undo is asked to override that
    direct([("update_contact", {"id": "c-1", "email": "grace@elsewhere.example"})], held_demo)
    _undo_killed_mid_inverse(held_demo, session, "--force", "--to", "after-ada")
    # when the sweep resumes it
    command("recover_sagas")
    # then the drifted update is forced back, and the call before the checkpoint is left as it is
    session.refresh_from_db()
    contacts = world(held_demo)["contacts"]
    assert session.status == "ROLLED_BACK", session.error
    assert contacts["c-1"] == {"id": "c-1", "name": "Grace", "email": "grace@example.com"}
    assert contacts["c-2"]["name"] == "Alan" and contacts["c-3"] == kept
    assert Step.objects.get(saga=session, action="proxy.demo.create_contact").status == "COMPLETED"
    requested = AuditEvent.objects.get(saga_id=session.id, event_type="UNDO_REQUESTED")
    assert requested.data["force"] is True and requested.data["to_checkpoint"] == "after-ada"


def test_a_resumed_undo_without_force_refuses_a_drifted_inverse(tmp_path: Path, held_demo: HeldDemo):
    two_contacts(held_demo)
    calls: list[Call] = [("update_contact", {"id": "c-1", "name": "Grace H."}), ("delete_contact", {"id": "c-2"})]
    session = through_the_proxy(tmp_path, held_demo, calls)
    direct([("update_contact", {"id": "c-1", "email": "grace@elsewhere.example"})], held_demo)
    _undo_killed_mid_inverse(held_demo, session)
    command("recover_sagas")
    # the resumed walk refuses the drifted update as the first run would have, after finishing the held inverse
    session.refresh_from_db()
    assert session.status == "ROLLBACK_FAILED"
    steps = dict(Step.objects.filter(saga=session).values_list("action", "status"))
    assert steps == {"proxy.demo.delete_contact": "COMPENSATED", "proxy.demo.update_contact": "COMPENSATION_FAILED"}
    update = Step.objects.get(saga=session, action="proxy.demo.update_contact")
    assert update.compensation_error["code"] == "STATE_DRIFTED"
    assert world(held_demo)["contacts"]["c-1"]["email"] == "grace@elsewhere.example"


def test_the_sweeps_retry_of_a_failed_undo_is_an_undo(tmp_path: Path, held_demo: HeldDemo):
    held_demo.release_file.touch()  # nothing is held here
    two_contacts(held_demo)
    calls: list[Call] = [("create_contact", {"name": "Ada", "email": "ada@example.com"}), SESSION_CALLS[4]]
    session = through_the_proxy(tmp_path, held_demo, calls)
    # given the CRM is down when the undo runs: the create's inverse fails (transiently), the email is listed
    held_demo.stop()
    with pytest.raises(SystemExit):
        command("undo", str(session.id))
    session.refresh_from_db()
    create = Step.objects.get(saga=session, action="proxy.demo.create_contact")
    assert session.status == "ROLLBACK_FAILED" and session.next_recovery_at is not None
    assert create.status == "COMPENSATION_FAILED" and create.compensation_error["retryable"]
    # when the CRM is back (a fresh world) and the retry's time has come (set now instead of waiting 30 s)
    held_demo.start()
    Saga.objects.filter(pk=session.pk).update(next_recovery_at=Now())
    command("recover_sagas")
    # then the sweep retried it as an undo: the inverse ran with its key, the email stays listed once, not failed
    session.refresh_from_db()
    assert session.status == "ROLLED_BACK", session.error
    assert _inverse_calls(held_demo, create, "delete_contact") == [f"{create.id}:rollback"]
    assert _listed(session) == {"send_email": ("needs_decision", "C")}
    assert AuditEvent.objects.filter(saga_id=session.id, event_type="UNDO_LISTED").count() == 1


def _press_rollback(operator: Any, session: Saga) -> None:
    operator.post(f"/admin/sagas/saga/{session.id}/do/rollback/", {"next": "/admin/"})
    detail = operator.get(f"/admin/sagas/saga/{session.id}/detail/").content.decode()
    assert detail.count("UNDO_LISTED") == 2  # the session detail's audit trail shows the listing


ROLL_BACK: dict[str, Callable[[pytest.FixtureRequest, Saga], Any]] = {
    # the console's rollback button, as an operator of acme presses it
    "console": lambda request, s: _press_rollback(request.getfixturevalue("login")("olga"), s),
    # the saga's rollback operation (MCP, REST and A2A invoke this same entry of the table)
    "operation": lambda request, s: invoke(
        OPERATIONS["rollback_saga"], local_principal(tenant_id="acme"), {"saga_id": str(s.id)}
    ),
    "undo": lambda request, s: command("undo", str(s.id)),
}


@pytest.mark.parametrize("surface", sorted(ROLL_BACK))
def test_every_rollback_of_a_session_lists_what_undo_lists(
    tmp_path: Path, held_demo: HeldDemo, request: pytest.FixtureRequest, surface: str
):
    held_demo.release_file.touch()  # nothing is held here
    before = two_contacts(held_demo)
    session = through_the_proxy(tmp_path, held_demo, SESSION_CALLS)
    # when
    ROLL_BACK[surface](request, session)
    # then the inverses ran, and the email and the transfer are listed in the audit chain, not failed
    session.refresh_from_db()
    assert session.status == "ROLLED_BACK" and world(held_demo)["contacts"] == before["contacts"]
    assert _listed(session) == {"send_email": ("needs_decision", "C"), "transfer_funds": ("no_way_back", "I")}
    assert Step.objects.filter(saga=session, status="COMPENSATED").count() == 3
    # and the ledger says so per call
    rows = [json.loads(line) for line in command("ledger", "--session", str(session.id), "--json").splitlines()]
    assert {row["tool"]: row["undo"] for row in rows if row["undo"]} == {
        "send_email": "needs_decision",
        "transfer_funds": "no_way_back",
    }


def test_a_registered_action_run_in_a_session_is_compensated_by_the_walk(downstream: RecordingHTTPServer):
    # given a session in which the agent also ran a registered action (execute_saga_step), no proxied call
    actor = local_principal(tenant_id="acme")
    session = invoke(OPERATIONS["proxy_session_open"], actor, {"session": {"client": {"name": "t"}}})
    register(http_contract("reserve", downstream.url))
    step = coordinator.saga_step_execute(actor=actor, saga_id=session["saga_id"], action="reserve", input={"n": 1})
    # when the session is rolled back
    answer = invoke(OPERATIONS["rollback_saga"], actor, {"saga_id": session["saga_id"]})
    # then the walk compensated it with its key, as an ordinary rollback would
    assert answer["status"] == "ROLLED_BACK"
    assert idempotency_keys(downstream, "/reserve/undo") == [f"{step.id}:rollback"]
    assert Step.objects.get(pk=step.id).status == "COMPENSATED"
