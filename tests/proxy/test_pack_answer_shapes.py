"""Sagaz's toybox pack through the path production runs, against a CRM answering in every shape MCP servers answer
in: text JSON only (Sagaz's toybox, most servers), structuredContent only, both, text that is not JSON, and isError.

The official client calls through the journaled proxy (the toybox over stdio, Sagaz's pack unchanged), then
`semantic-saga undo` runs the inverses the registry renders from the stored payload: create, update and delete are
undone exactly; a real drift is detected and `--force` restores; a result that carries no JSON is `cannot_undo` in
the ledger's undo plan and in `undo --dry-run` as soon as the call is journaled, and the undo then says why."""

from __future__ import annotations

import json
import sys
from io import StringIO
from pathlib import Path
from typing import Any

import anyio
import pytest
from django.core.management import call_command

from audit.models import AuditEvent
from sagas.models import Saga, Step
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
STORY: list[Call] = [
    ("create_contact", {"name": "Ada", "email": "ada@example.com"}),
    ("update_contact", {"id": "c-1", "email": "grace@new.example", "company": None}),
    ("delete_contact", {"id": "c-2"}),
]


@pytest.fixture(autouse=True)
def _acme(settings: Any) -> None:
    settings.SAGA_DEFAULT_TENANT = "acme"  # the commands act as the local operator of the proxy's tenant


def _world_file(tmp_path: Path) -> Path:
    world = tmp_path / "toybox.json"
    world.write_text(json.dumps({"contacts": {"c-1": GRACE, "c-2": ALAN}, "next": 3, "seen": {}}))
    return world


def _contacts(world: Path) -> dict[str, Any]:
    return dict(json.loads(world.read_text())["contacts"])


def _session(tmp_path: Path, world: Path, answers: str, calls: list[Call], script: Path = TOYBOX) -> list[Any]:
    """One client session through the journaled proxy in front of the toybox answering in `answers`."""
    server = {"command": sys.executable, "args": [str(script), "--state", str(world), "--answers", answers]}
    config = config_file(tmp_path, {"toybox": server}, packs=[str(TOYBOX_PACK)])
    with serve_proxy(config, call_path=journaled) as served:

        async def session() -> list[Any]:
            async with connect(served.url, "legacy") as client:
                return [await client.call_tool(tool, arguments) for tool, arguments in calls]

        return anyio.run(session)


def _command(*args: str) -> tuple[str, int]:
    out = StringIO()
    try:
        call_command(*args, stdout=out)
    except SystemExit as exited:
        return out.getvalue(), int(exited.code or 0)
    return out.getvalue(), 0


def _verdicts(report: dict[str, Any]) -> list[tuple[str, str]]:
    return [(item["tool"], item["verdict"]) for item in report["items"]]


@pytest.mark.parametrize("answers", ["text", "structured", "both"])
def test_the_toybox_story_is_undone_exactly_whatever_the_answer_shape(tmp_path: Path, answers: str):
    world = _world_file(tmp_path)
    before = _contacts(world)
    answered = _session(tmp_path, world, answers, STORY)
    assert not any(answer.is_error for answer in answered), [text(answer) for answer in answered]
    # the agent got what the server answered; the step keeps it, and the payload the pack reads
    create = Step.objects.get(action="proxy.toybox.create_contact")
    assert create.result["result"]["id"] == "c-3"
    assert create.result["result_from"] == ("text" if answers == "text" else "structuredContent")
    # the dry run renders each inverse exactly as the undo will send it
    dry = json.loads(_command("undo", "--dry-run", "--json")[0])
    assert _verdicts(dry) == [("delete_contact", "would_undo"), ("update_contact", "would_undo"),
                              ("create_contact", "would_undo")]  # fmt: skip
    assert dry["items"][2]["inverse"] == {"tool": "delete_contact", "arguments": {"id": "c-3"}}
    # when undone
    shown, code = _command("undo", "--json")
    report = json.loads(shown)
    # then the world is as before, ids and a null company included
    assert code == 0 and report["status"] == "ROLLED_BACK", report
    assert _contacts(world) == before


def test_a_real_drift_is_refused_and_force_restores(tmp_path: Path):
    world = _world_file(tmp_path)
    before = _contacts(world)
    _session(tmp_path, world, "text", STORY[1:2])
    # a dry run reads the state once (a server that answers a repeated key with its first answer must not replay it)
    assert _verdicts(json.loads(_command("undo", "--dry-run", "--json")[0])) == [("update_contact", "would_undo")]
    # given someone changes Grace behind the proxy's back
    data = json.loads(world.read_text())
    data["contacts"]["c-1"]["name"] = "Grace Hopper"
    world.write_text(json.dumps(data))
    # when undone: the drift is seen on the text-JSON re-read, the inverse refused
    shown, code = _command("undo", "--json")
    report = json.loads(shown)
    assert code == 1 and _verdicts(report) == [("update_contact", "drifted")]
    assert "name changed since the call" in report["items"][0]["detail"]
    assert _contacts(world)["c-1"]["name"] == "Grace Hopper"
    # and --force writes the captured values back
    shown, code = _command("undo", "--force", "--json")
    assert code == 0 and json.loads(shown)["status"] == "ROLLED_BACK"
    assert _contacts(world) == before


def test_no_false_drift_when_nothing_changed_the_world(tmp_path: Path):
    world = _world_file(tmp_path)
    _session(tmp_path, world, "text", STORY[1:3])
    dry = json.loads(_command("undo", "--dry-run", "--json")[0])
    assert _verdicts(dry) == [("delete_contact", "would_undo"), ("update_contact", "would_undo")]


def test_a_result_that_carries_no_json_cannot_be_undone_and_says_so_at_once(tmp_path: Path):
    world = _world_file(tmp_path)
    answered = _session(tmp_path, world, "plain", STORY[:1])
    assert text(answered[0]).startswith("Done: id c-3")  # the agent got the sentence the server wrote
    # the ledger's undo plan says it as soon as the call is journaled
    row = json.loads(_command("ledger", "--json")[0].splitlines()[0])
    assert row["result"][0]["text"].startswith("Done: id c-3")  # the result as stored: what the agent got
    assert row["undo_plan"]["verdict"] == "cannot_undo"
    assert row["undo_plan"]["detail"] == "cannot be undone: the result carries no JSON (its text is not JSON)"
    # the dry run says the same, not "would undo"
    dry = json.loads(_command("undo", "--dry-run", "--json")[0])
    assert _verdicts(dry) == [("create_contact", "cannot_undo")]
    # and the undo sends nothing for it, lists it for a person with the reason (like a call with no way back), and
    # goes on: the contact stays
    shown, code = _command("undo", "--json")
    report = json.loads(shown)
    assert code == 3 and _verdicts(report) == [("create_contact", "cannot_undo")]  # 3: undone, calls left
    assert "the result carries no JSON" in report["items"][0]["detail"]
    assert AuditEvent.objects.filter(event_type="UNDO_LISTED", data__verdict="cannot_undo").count() == 1
    assert "c-3" in _contacts(world)


def test_a_call_that_cannot_be_undone_does_not_block_the_older_ones(tmp_path: Path):
    world = _world_file(tmp_path)
    before = _contacts(world)
    _session(tmp_path, world, "text", STORY[1:2])  # an update, undoable
    _session(tmp_path, world, "plain", STORY[:1])  # then a create answered in plain text, in another session
    # the newest session's create cannot be undone; the older session is still undone exactly
    assert json.loads(_command("undo", "--json")[0])["status"] == "ROLLED_BACK"
    older = Saga.objects.order_by("created_at").first()
    assert older is not None
    assert json.loads(_command("undo", str(older.id), "--json")[0])["status"] == "ROLLED_BACK"
    assert {key: value for key, value in _contacts(world).items() if key != "c-3"} == before


def test_a_server_that_cannot_be_reached_is_not_a_drift(tmp_path: Path):
    world = _world_file(tmp_path)
    script = tmp_path / TOYBOX.name
    script.write_text(TOYBOX.read_text())
    _session(tmp_path, world, "text", STORY[1:2], script=script)
    # given the server cannot start any more (its script moved away; the journal row itself is left as written)
    script.rename(tmp_path / "moved.py")
    # then the dry run does not call it a drift, nor advise --force
    dry = json.loads(_command("undo", "--dry-run", "--json")[0])
    assert _verdicts(dry) == [("update_contact", "failed")] and "--force" not in dry["items"][0]["detail"]
    assert "could not be read" in dry["items"][0]["detail"]


def test_an_is_error_call_changed_nothing_and_is_skipped(tmp_path: Path):
    world = _world_file(tmp_path)
    answered = _session(tmp_path, world, "text", [("create_contact", {"name": "X", "email": "fail@example.com"})])
    assert answered[0].is_error
    report = json.loads(_command("undo", "--json")[0])
    assert _verdicts(report) == [("create_contact", "skipped")] and report["status"] == "ROLLED_BACK"
    assert Saga.objects.get().status == "ROLLED_BACK"


def test_an_entry_whose_inverse_the_server_lacks_gives_no_r_and_is_named_at_start(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
):
    # given a pack whose inverse names a tool the toybox does not have (a typo)
    pack = tmp_path / "typo-pack.json"
    entry = {"tool": "update_contact", "inverse": {"tool": "restore_contact", "args": {"id": "$.args.id"}}}
    pack.write_text(json.dumps({"name": "typo", "description": "a typo", "entries": [entry]}))
    world = _world_file(tmp_path)
    server = {"command": sys.executable, "args": [str(TOYBOX), "--state", str(world)]}
    config = config_file(tmp_path, {"toybox": server}, packs=[str(pack)], policy={"class": {"unknown": "allow"}})
    with caplog.at_level("WARNING", logger="sagas.protocols.proxy"), serve_proxy(config, call_path=journaled) as served:

        async def session() -> Any:
            async with connect(served.url, "legacy") as client:
                return await client.call_tool("update_contact", {"id": "c-1", "name": "Grace H."})

        answered = anyio.run(session)
    # then the proxy said so at start, and the call is not R (its inverse could never be called)
    assert "server 'toybox' has no tool 'restore_contact'" in caplog.text
    assert not answered.is_error
    step = Step.objects.get(action="proxy.toybox.update_contact")
    assert step.action_definition["proxy"]["class"] == "unknown" and "compensation" not in step.action_definition


def test_undo_from_another_directory_starts_the_server_where_the_proxy_did(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    # given a server whose script is named relative to the directory the proxy runs in (as Sagaz's config does)
    world = _world_file(tmp_path)
    before = _contacts(world)
    script = str(TOYBOX.relative_to(Path.cwd()))
    server = {"command": sys.executable, "args": [script, "--state", str(world), "--answers", "text"]}
    config = config_file(tmp_path, {"toybox": server}, packs=[str(TOYBOX_PACK)])
    with serve_proxy(config, call_path=journaled) as served:

        async def session() -> None:
            async with connect(served.url, "legacy") as client:
                for tool, arguments in STORY:
                    assert not (await client.call_tool(tool, arguments)).is_error

        anyio.run(session)
    # when the operator undoes it from another directory
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    shown, code = _command("undo", "--json")
    # then the inverses reached the same server
    assert code == 0 and json.loads(shown)["status"] == "ROLLED_BACK"
    assert _contacts(world) == before
