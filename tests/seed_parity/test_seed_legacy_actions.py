"""semantic-saga-mcp's older action map, its `examples/actions.json` (verbatim in seed_files/, see its README), starts
as the seed starts it: `semantic-saga-mcp --actions examples/actions.json` registers reserve_inventory@legacy-v1 and
warns on stderr that the file is in the older format, and the start-up checks accept it with warning saga.W030."""

from __future__ import annotations

import json
import sqlite3
from io import StringIO
from pathlib import Path
from typing import Any

from django.core.management import call_command

from registry.checks import actions_file_check
from tests.seed_parity.test_seed_start_up import INITIALIZE, new_user, run

ACTIONS = Path(__file__).with_name("seed_files") / "actions.json"


def test_the_seed_file_is_the_upstream_bytes():
    # kept exactly as upstream ships it (the size of examples/actions.json at the commit in README.md)
    assert len(ACTIONS.read_text(encoding="utf-8")) == 378


def test_the_start_up_checks_accept_the_seed_action_map_with_a_warning(settings: Any):
    # given the seed's action map named as `semantic-saga-mcp --actions examples/actions.json` names it
    settings.SAGA_ACTIONS_FILE = str(ACTIONS)
    # then the registry check finds nothing to refuse, only the older format to warn of
    assert [(m.id, m.is_serious()) for m in actions_file_check()] == [("saga.W030", False)]
    # and `semantic-saga check --tag saga` passes, printing the warning
    out, err = StringIO(), StringIO()
    call_command("check", "--tag", "saga", stdout=out, stderr=err)
    assert "saga.W030" in out.getvalue() + err.getvalue()
    assert "older action-map format" in out.getvalue() + err.getvalue()


def test_the_seeds_command_line_starts_with_the_seed_action_map_and_registers_it(tmp_path: Path):
    # given a new user starting the seed's command line with its example action map
    database = tmp_path / "seed.db"
    done = run(
        "semantic-saga-mcp",
        ["--actions", str(ACTIONS), "--database", str(database)],
        new_user(tmp_path),
        tmp_path,
        input=json.dumps(INITIALIZE) + "\n",
    )
    # then it started and answered
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    (answer,) = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert answer["result"]["serverInfo"]
    # and it warned, on stderr, that the file is in the older format and what its entry became
    assert f"{ACTIONS} is in semantic-saga-mcp's older action-map format" in done.stderr
    assert "reserve_inventory@legacy-v1" in done.stderr and "docs/action_registry.md" in done.stderr
    # and the contract is registered, active, as the seed names it
    with sqlite3.connect(database) as db:
        rows = db.execute(
            "SELECT version, active, kind FROM registry_actiondefinition WHERE action_id = 'reserve_inventory'"
        ).fetchall()
    assert rows == [("legacy-v1", 1, "http")]
