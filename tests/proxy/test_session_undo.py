"""Undo of whole sessions whose calls build on each other, against a CRM that answers text JSON only and echoes the
row it deleted (Sagaz's toybox shape, our own server: tests/proxy/toybox_server.py --echo-deletes), with Sagaz's
toybox pack unchanged, through the journaled proxy and the official client.

Each session: the world snapshot before, `semantic-saga undo`, the world compared whole; every call's verdict; the
session's end state as `undo`, `status` and `ledger` report it. A change made by another process after the session
(real drift) refuses that call and only that call. A session with calls left is reported so everywhere, and an undo
stopped part-way says so and resumes without repeating an inverse that ran."""

from __future__ import annotations

import json
import sys
from datetime import timedelta
from io import StringIO
from pathlib import Path
from typing import Any

import anyio
import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from governance.identity.principal import local_principal
from sagas.coordinator._undo_walk import UndoWatch, watching
from sagas.coordinator.proxy.undo import proxy_session_undo
from sagas.models import Saga, Step
from sagas.operations.invoke import invoke
from sagas.operations.table import OPERATIONS
from sagas.protocols.proxy.runtime import journaled
from tests.proxy.agent import connect, text
from tests.proxy.conftest import SAGAZ
from tests.proxy.harness import config_file, serve_proxy

pytestmark = pytest.mark.django_db(transaction=True)
TOYBOX = Path(__file__).resolve().parent / "toybox_server.py"
TOYBOX_PACK = SAGAZ / "packages" / "toybox" / "sagaz-pack.json"
Call = tuple[str, dict[str, Any]]
GRACE = {"id": "c-1", "name": "Grace", "email": "grace@example.com", "company": "Navy"}
ALAN = {"id": "c-2", "name": "Alan", "email": "alan@example.com", "company": None}
LIN = {"id": "c-3", "name": "Lin", "email": "lin@example.com", "company": "Bell"}


@pytest.fixture(autouse=True)
def _acme(settings: Any) -> None:
    settings.SAGA_DEFAULT_TENANT = "acme"  # the commands act as the local operator of the proxy's tenant


def _world(tmp_path: Path) -> Path:
    world = tmp_path / "toybox.json"
    contacts = {"c-1": GRACE, "c-2": ALAN, "c-3": LIN}
    world.write_text(json.dumps({"contacts": contacts, "next": 4, "seen": {}}))
    return world


def _contacts(world: Path) -> dict[str, Any]:
    return dict(json.loads(world.read_text())["contacts"])


def _change(world: Path, contact: str, **fields: Any) -> None:
    """Another process changes the world behind the proxy's back."""
    data = json.loads(world.read_text())
    data["contacts"][contact].update(fields)
    world.write_text(json.dumps(data))


def _answers(tmp_path: Path, world: Path, calls: list[Call], packs: list[Path], **config: Any) -> list[Any]:
    """One agent session through the journaled proxy in front of the CRM (deletes echo their row): its answers."""
    server = {"command": sys.executable, "args": [str(TOYBOX), "--state", str(world), "--echo-deletes"]}
    path = config_file(tmp_path, {"toybox": server}, packs=[str(pack) for pack in packs], **config)
    with serve_proxy(path, call_path=journaled) as served:

        async def session() -> list[Any]:
            async with connect(served.url, "legacy") as client:
                return [await client.call_tool(tool, arguments) for tool, arguments in calls]

        return anyio.run(session)


def _session(tmp_path: Path, world: Path, calls: list[Call], *, pack: bool = True) -> Saga:
    """A session every call of which succeeded (Sagaz's toybox pack, or none): the session."""
    answered = _answers(tmp_path, world, calls, [TOYBOX_PACK] if pack else [])
    assert not any(answer.is_error for answer in answered), [text(answer) for answer in answered]
    return Saga.objects.filter(kind="proxy_session").order_by("-created_at").first()  # type: ignore[return-value]


def _command(*args: str) -> tuple[str, int]:
    out = StringIO()
    try:
        call_command(*args, stdout=out)
    except SystemExit as exited:
        return out.getvalue(), int(exited.code or 0)
    return out.getvalue(), 0


def _undo(*args: str) -> tuple[dict[str, Any], int]:
    shown, code = _command("undo", "--json", *args)
    return json.loads(shown), code


def _verdicts(report: dict[str, Any]) -> list[tuple[str, str]]:
    return [(item["tool"], item["verdict"]) for item in report["items"]]


def test_a_delete_that_echoes_the_row_is_undone_exactly(tmp_path: Path):
    world = _world(tmp_path)
    before = _contacts(world)
    _session(tmp_path, world, [("delete_contact", {"id": "c-3"})])
    # the answer carried every captured field of a contact that is gone: the undo reads the world, not the answer
    report, code = _undo()
    assert (code, _verdicts(report)) == (0, [("delete_contact", "undone")])
    assert _contacts(world) == before
    assert report["outcome"]["state"] == "undone" and report["status"] == "ROLLED_BACK"


def test_create_update_delete_of_one_record_is_undone_whole(tmp_path: Path):
    world = _world(tmp_path)
    before = _contacts(world)
    calls: list[Call] = [
        ("create_contact", {"name": "Ada", "email": "ada@example.com"}),
        ("update_contact", {"id": "c-4", "email": "ada@new.example", "company": "Analytical"}),
        ("delete_contact", {"id": "c-4"}),
        ("update_contact", {"id": "c-1", "name": "Grace H."}),
        ("update_contact", {"id": "c-1", "company": None}),
    ]
    _session(tmp_path, world, calls)
    dry, _ = _undo("--dry-run")
    assert [verdict for _, verdict in _verdicts(dry)] == ["would_undo"] * 5
    report, code = _undo()
    assert code == 0
    assert [verdict for _, verdict in _verdicts(report)] == ["undone"] * 5
    assert _contacts(world) == before
    assert report["outcome"]["summary"] == "undone: 5 of 5 calls undone"
    shown, _ = _command("status")
    assert "overall: ok" in shown and "undone" in shown


def test_a_change_outside_the_session_refuses_that_call_and_only_that_call(tmp_path: Path):
    world = _world(tmp_path)
    calls: list[Call] = [
        ("create_contact", {"name": "Ada", "email": "ada@example.com"}),
        ("update_contact", {"id": "c-1", "name": "Grace H."}),
        ("delete_contact", {"id": "c-2"}),
    ]
    session = _session(tmp_path, world, calls)
    _change(world, "c-1", email="grace@elsewhere.example")  # a colleague, after the session
    report, code = _undo()
    assert code == 1
    assert _verdicts(report) == [
        ("delete_contact", "undone"),
        ("update_contact", "drifted"),
        ("create_contact", "undone"),
    ]
    assert "email changed since the call" in report["items"][1]["detail"]
    contacts = _contacts(world)
    assert contacts["c-1"] == {**GRACE, "name": "Grace H.", "email": "grace@elsewhere.example"}  # their work kept
    assert contacts["c-2"] == ALAN and "c-4" not in contacts
    session.refresh_from_db()
    assert session.status == "ROLLBACK_FAILED"
    assert report["outcome"]["state"] == "undo_stopped"
    shown, _ = _command("status")
    assert "overall: needs an operator" in shown and "undo stopped" in shown


def test_the_sessions_own_later_call_without_an_inverse_is_not_drift(tmp_path: Path):
    # given a rule that classes update_contact C (a correction by hand), and a session ending with one
    world = _world(tmp_path)
    rules = [{"tool": "update_contact", "class": "C", "reason": "the second edit is a correction by hand"}]
    calls: list[Call] = [
        ("create_contact", {"name": "Ada", "email": "ada@example.com"}),
        ("delete_contact", {"id": "c-3"}),
        ("update_contact", {"id": "c-1", "name": "Grace H."}),
    ]
    _answers(tmp_path, world, calls, [TOYBOX_PACK], rules=rules)
    report, code = _undo()
    # then nothing is called drift or blamed on someone: the update stays (C), the rest is undone
    assert _verdicts(report) == [
        ("update_contact", "needs_decision"),
        ("delete_contact", "undone"),
        ("create_contact", "undone"),
    ]
    assert code == 3 and report["outcome"]["state"] == "undone_with_calls_left"
    assert report["outcome"]["summary"] == "undone, 1 call left: update_contact (needs a decision)"


def test_a_session_without_a_pack_is_not_reported_undone(tmp_path: Path):
    world = _world(tmp_path)
    session = _session(tmp_path, world, [("create_contact", {"name": "Ada", "email": "ada@example.com"})], pack=False)
    step = Step.objects.get(saga=session)
    assert step.action_definition["proxy"]["class"] == "unknown"  # a name never says R
    ledger = [json.loads(line) for line in _command("ledger", "--json")[0].splitlines()]
    assert ledger[0]["class"] == "unknown" and ledger[0]["undo_plan"]["verdict"] == "no_way_back"
    report, code = _undo()
    assert code == 3 and _verdicts(report) == [("create_contact", "no_way_back")]
    assert report["outcome"]["summary"] == "undone, 1 call left: create_contact (no way back)"
    assert "c-4" in _contacts(world)
    shown, _ = _command("status")
    assert "overall: ok" not in shown and "undone, 1 call left: create_contact (no way back)" in shown
    assert "the session is undone, 1 call left" in _command("ledger")[0]
    session.refresh_from_db()
    assert session.error is None  # an undo that ran to its end shows no error
    # the REST and MCP answers (the operation table's get_saga) carry the same outcome
    answer = invoke(OPERATIONS["get_saga"], local_principal(tenant_id="acme"), {"saga_id": str(session.id)})
    assert answer["status"] == "ROLLED_BACK" and answer["error"] is None
    assert answer["undo"]["state"] == "undone_with_calls_left" and answer["undo"]["needs_operator"] is True
    assert answer["undo"]["left"] == [
        {"seq": 1, "tool": "create_contact", "verdict": "no_way_back", "words": "no way back"}
    ]


def test_an_undo_stopped_part_way_says_so_and_resumes_without_repeating(tmp_path: Path):
    world = _world(tmp_path)
    before = _contacts(world)
    calls: list[Call] = [("create_contact", {"name": f"N{n}", "email": f"n{n}@example.com"}) for n in range(5)]
    session = _session(tmp_path, world, calls)
    actor = local_principal(tenant_id="acme")
    seen: list[str] = []

    def progress(done: int, total: int, item: Any) -> None:
        seen.append(f"{done}/{total} {item.verdict}")

    # when the undo is asked to stop after two inverses (as Ctrl-C or SIGTERM asks the command)
    with watching(UndoWatch(progress=progress, stop=lambda: len(seen) >= 2)):
        first = proxy_session_undo(actor=actor, saga_id=session.id)
    assert seen == ["1/5 undone", "2/5 undone"]
    assert first.outcome is not None and first.outcome["summary"] == "undo interrupted: 2 of 5 done; run undo again"
    session.refresh_from_db()
    assert session.status == "ROLLING_BACK" and session.lease_expires_at is None
    shown, _ = _command("status")
    assert "undo interrupted: 2 of 5 done; run undo again" in shown and "overall: needs an operator" in shown
    # while a runner holds the session (alive, or killed outright until its lease lapses), status is not "ok" either
    Saga.objects.filter(pk=session.pk).update(lease_expires_at=timezone.now() + timedelta(seconds=30))
    shown, _ = _command("status")
    assert "overall: an undo is running" in shown and "undoing: 2 of 5 done" in shown
    Saga.objects.filter(pk=session.pk).update(lease_expires_at=None)
    # then undo again resumes where it stopped, and no inverse is sent twice
    report, code = _undo()
    assert code == 0 and report["outcome"]["state"] == "undone"
    assert [verdict for _, verdict in _verdicts(report)] == ["already_undone"] * 2 + ["undone"] * 3
    assert _contacts(world) == before
    sent = json.loads(world.read_text())["log"]  # every call the server received, with its key
    rollbacks = [key for key in sent if key.endswith(":rollback")]
    assert len(rollbacks) == len(set(rollbacks)) == 5


def test_a_session_undone_once_is_refused_again_saying_how_it_ended(tmp_path: Path):
    world = _world(tmp_path)
    _session(tmp_path, world, [("delete_contact", {"id": "c-3"})])
    assert _undo()[1] == 0
    with pytest.raises(CommandError) as refused:
        call_command("undo", stdout=StringIO())
    assert "ALREADY_UNDONE" in str(refused.value) and "was already undone (undone: 1 of 1 calls undone)" in str(
        refused.value
    )


def test_status_counts_sessions_past_its_limit(tmp_path: Path):
    world = _world(tmp_path)
    _session(tmp_path, world, [("create_contact", {"name": "Ada", "email": "ada@example.com"})], pack=False)
    _undo()  # undone, 1 call left (no pack: no way back)
    newer = _session(tmp_path, world, [("get_contact", {"id": "c-1"})])
    shown, _ = _command("status", "--limit", "1")
    assert newer.id is not None and "overall: ok" not in shown
    assert "older sessions not shown: 0 waiting for an operator, 1 undone with calls left" in shown


def _pack_reading_what_create_made(tmp_path: Path) -> Path:
    """Sagaz's toybox pack, with its create_contact entry reading the contact it made right after the call."""
    pack = json.loads(TOYBOX_PACK.read_text())
    pack["entries"][0]["readAfter"] = {"tool": "get_contact", "args": {"id": "$.result.id"}}
    path = tmp_path / "toybox-read-after.json"
    path.write_text(json.dumps(pack))
    return path


@pytest.mark.parametrize("colleague", [False, True])
def test_a_create_that_reads_what_it_made_is_checked_for_drift(tmp_path: Path, colleague: bool):
    world = _world(tmp_path)
    before = _contacts(world)
    calls: list[Call] = [("create_contact", {"name": "Ada", "email": "ada@example.com"})]
    _answers(tmp_path, world, calls, [_pack_reading_what_create_made(tmp_path)])
    step = Step.objects.get(action="proxy.toybox.create_contact")
    assert step.result["post_state"]["email"] == "ada@example.com"  # read right after the call
    if colleague:
        _change(world, "c-4", email="ada@important.example")
    report, code = _undo()
    if colleague:  # their work is kept, and said so
        assert (code, _verdicts(report)) == (1, [("create_contact", "drifted")])
        assert "email changed since the call (read with get_contact)" in report["items"][0]["detail"]
        assert _contacts(world)["c-4"]["email"] == "ada@important.example"
    else:
        assert (code, _verdicts(report)) == (0, [("create_contact", "undone")])
        assert _contacts(world) == before


def test_a_call_that_answered_an_error_but_changed_the_world_is_undone(tmp_path: Path):
    world = _world(tmp_path)
    before = _contacts(world)
    (answered,) = _answers(
        tmp_path, world, [("update_contact", {"id": "c-1", "email": "partial@example.com"})], [TOYBOX_PACK]
    )
    assert answered.is_error and _contacts(world)["c-1"]["email"] == "partial@example.com"
    report, code = _undo()
    # the read after the call showed the change the error answer did not admit: the undo puts it back
    assert (code, _verdicts(report)) == (0, [("update_contact", "undone")])
    assert _contacts(world) == before


def test_a_failed_call_with_nothing_read_after_it_says_a_change_would_not_be_seen(tmp_path: Path):
    world = _world(tmp_path)
    (answered,) = _answers(
        tmp_path, world, [("create_contact", {"name": "X", "email": "fail@example.com"})], [TOYBOX_PACK]
    )
    assert answered.is_error
    report, _ = _undo("--dry-run")
    assert _verdicts(report) == [("create_contact", "skipped")]
    assert "nothing was read after it, so a change it made anyway is not seen" in report["items"][0]["detail"]
