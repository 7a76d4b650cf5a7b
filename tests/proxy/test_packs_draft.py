"""`semantic-saga packs draft --config FILE SERVER`: a draft pack from what a real server lists (the demo world over
stdio), which finds the pairs its names show, maps each argument from the schemas, loads as a pack, and names on
stderr every tool it could not pair; a wrong server name says which there are."""

from __future__ import annotations

import json
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from registry.packs import parse_pack
from tests.proxy.conftest import EXAMPLES
from tests.proxy.harness import DEMO, config_file, stdio


def _draft(config: Path, *args: str) -> tuple[str, str]:
    out, err = StringIO(), StringIO()
    call_command("packs", "draft", *args, "--config", str(config), "--timeout", "30", stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def _calls(entries: list[dict]) -> dict[str, tuple[object, object]]:
    return {entry["tool"]: (entry.get("capture"), entry["inverse"]) for entry in entries}


def test_a_draft_of_the_demo_world_finds_the_pairs_its_hand_written_pack_declares(tmp_path: Path):
    config = config_file(tmp_path, {"demo": stdio(DEMO)})
    printed, said = _draft(config, "demo")
    draft = json.loads(printed)
    # the draft loads as a pack, and drafts what examples/demo_pack.json declares by hand
    assert parse_pack(draft, "draft").name == "demo-draft"
    hand_written = json.loads((EXAMPLES / "demo_pack.json").read_text())["entries"]
    assert _calls(draft["entries"]) == _calls(hand_written)
    assert all(entry["note"].startswith("DRAFTED") for entry in draft["entries"])
    # and says which tools it could not pair, with their class
    assert "no pair for send_email (C:" in said and "no pair for transfer_funds (I:" in said
    assert "get_contact" not in said  # reads need no inverse


def test_a_draft_can_be_written_to_a_file(tmp_path: Path):
    config = config_file(tmp_path, {"demo": stdio(DEMO)})
    out = tmp_path / "demo-draft.json"
    printed, said = _draft(config, "demo", "--out", str(out))
    assert printed == "" and f"wrote {out}" in said
    assert parse_pack(json.loads(out.read_text()), str(out)).entries


def test_a_server_the_configuration_does_not_have_is_named_with_the_ones_it_has(tmp_path: Path):
    config = config_file(tmp_path, {"demo": stdio(DEMO)})
    with pytest.raises(CommandError) as refused:
        _draft(config, "crm")
    assert "has no server 'crm'; its servers are demo" in str(refused.value)
    with pytest.raises(CommandError) as unnamed:
        _draft(config)
    assert "Name the server to draft for" in str(unnamed.value)


def test_the_documented_order_of_arguments_works_and_a_bad_out_path_is_one_line(tmp_path: Path):
    config = config_file(tmp_path, {"demo": stdio(DEMO)})
    out, err = StringIO(), StringIO()
    call_command("packs", "draft", "--config", str(config), "demo", "--timeout", "30", stdout=out, stderr=err)
    assert json.loads(out.getvalue())["name"] == "demo-draft"
    with pytest.raises(CommandError) as refused:
        _draft(config, "demo", "--out", str(tmp_path / "no-such-dir" / "d.json"))
    assert "name a file in a directory that exists" in str(refused.value)
