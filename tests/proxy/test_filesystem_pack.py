"""builtin:filesystem against the real @modelcontextprotocol/server-filesystem (pinned in
tests/proxy/reference_servers/): an agent session through the journaled proxy, `semantic-saga undo`, and the
directory tree and every file's bytes compared with what they were before, wherever the pack says R; what it says
has no inverse is left and listed with its reason; a file changed by someone else since is not overwritten."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.proxy.agent import text
from tests.proxy.demo_session import command
from tests.proxy.harness import config_file
from tests.proxy.reference import agent_session, npm_server, refused_undo, succeeded

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _acme(settings: Any) -> None:
    settings.SAGA_DEFAULT_TENANT = "acme"  # the commands act as the local operator of the proxy's tenant


@pytest.fixture
def world(tmp_path: Path) -> Path:
    """The directory the server may touch, with a few files in it."""
    root = tmp_path / "world"
    (root / "docs").mkdir(parents=True)
    (root / "notes.txt").write_text("alpha\nbeta\n")
    (root / "docs" / "plan.md").write_text("# Plan\n\n- ship it\n")
    (root / "draft.txt").write_text("first draft\n")
    return root


@pytest.fixture
def filesystem(world: Path) -> dict[str, Any]:
    return {"command": str(npm_server("mcp-server-filesystem")), "args": [str(world)]}


def _tree(root: Path) -> dict[str, bytes | None]:
    """Every path under `root` with its bytes (None: a directory)."""
    return {
        str(path.relative_to(root)): (path.read_bytes() if path.is_file() else None) for path in sorted(root.rglob("*"))
    }


def _session(tmp_path: Path, server: dict[str, Any], calls: list[tuple[str, dict[str, Any]]]) -> None:
    """The agent's calls through the proxy with builtin:filesystem, each of them answered without an error."""
    succeeded(agent_session(tmp_path, "fs", server, "builtin:filesystem", calls))


def test_a_filesystem_session_undone_leaves_every_file_as_it_was(
    tmp_path: Path, world: Path, filesystem: dict[str, Any]
) -> None:
    before = _tree(world)
    _session(
        tmp_path,
        filesystem,
        [
            ("write_file", {"path": str(world / "notes.txt"), "content": "rewritten by the agent\n"}),
            (
                "edit_file",
                {"path": str(world / "docs" / "plan.md"), "edits": [{"oldText": "- ship it", "newText": "- wait"}]},
            ),
            ("move_file", {"source": str(world / "draft.txt"), "destination": str(world / "docs" / "final.txt")}),
            ("write_file", {"path": str(world / "notes.txt"), "content": "and again\n"}),
        ],
    )
    assert _tree(world) != before
    report = json.loads(command("undo", "--json"))
    assert [(item["tool"], item["verdict"]) for item in report["items"]] == [
        ("write_file", "undone"),
        ("move_file", "undone"),
        ("edit_file", "undone"),
        ("write_file", "undone"),
    ]
    assert _tree(world) == before  # byte for byte, the tree and every file


def test_what_has_no_inverse_is_left_and_listed_with_the_packs_reason(
    tmp_path: Path, world: Path, filesystem: dict[str, Any]
) -> None:
    new_file = {"path": str(world / "out" / "new.txt"), "content": "brand new\n"}
    overwrite = {"path": str(world / "notes.txt"), "content": "changed\n"}
    before = _tree(world)
    _session(
        tmp_path,
        filesystem,
        [("create_directory", {"path": str(world / "out")}), ("write_file", new_file), ("write_file", overwrite)],
    )
    ledger = [json.loads(line) for line in command("ledger", "--json").splitlines()]
    # write_file is classed C before the call (a new file has no inverse), from the pack, with its reason
    assert {(row["tool"], row["class"], row["class_source"]) for row in ledger} == {
        ("create_directory", "C", "pack"),
        ("write_file", "C", "pack"),
    }
    assert "no inverse when the capture finds nothing" in ledger[1]["class_reason"]
    report = json.loads(command("undo", "--json"))
    verdicts = [(item["tool"], item["verdict"]) for item in report["items"]]
    assert verdicts == [
        ("write_file", "undone"),
        ("write_file", "needs_decision"),
        ("create_directory", "needs_decision"),
    ]
    assert "the file was new" in report["items"][1]["detail"] and "U+FFFD" not in report["items"][1]["detail"]
    # the overwrite is undone; the new file and directory stay, as the pack says
    assert _tree(world) == {**before, "out": None, "out/new.txt": b"brand new\n"}


def test_a_file_changed_since_the_call_is_not_overwritten_by_the_undo(
    tmp_path: Path, world: Path, filesystem: dict[str, Any]
) -> None:
    notes = world / "notes.txt"
    _session(tmp_path, filesystem, [("write_file", {"path": str(notes), "content": "agent's\n"})])
    notes.write_text("a colleague's edit, after the agent\n")
    dry = json.loads(command("undo", "--dry-run", "--json"))
    assert dry["items"][0]["verdict"] == "drifted"
    assert "content changed since the call (read with read_text_file)" in dry["items"][0]["detail"]
    assert refused_undo()[0]["verdict"] == "drifted"
    assert notes.read_text() == "a colleague's edit, after the agent\n"  # nothing lost


def test_a_capture_that_fails_otherwise_stops_the_call(tmp_path: Path, world: Path, filesystem: dict[str, Any]) -> None:
    # outside the allowed directories the read is refused ("Access denied"), which is not "not found"
    outside = tmp_path / "elsewhere.txt"
    calls = [("write_file", {"path": str(outside), "content": "x"})]
    answers = agent_session(tmp_path, "fs", filesystem, "builtin:filesystem", calls)
    assert answers[0].is_error and "so the call was not sent" in text(answers[0])
    assert not outside.exists()


def test_the_packs_command_shows_the_inverse_of_each_outcome(tmp_path: Path, filesystem: dict[str, Any]) -> None:
    config = config_file(tmp_path, {"fs": filesystem}, packs=["builtin:filesystem"])
    listed = command("packs", "--config", str(config))
    assert "write_file; not found: none: C; no match: none: C" in listed
    assert "fs: 14 tool(s)" in listed


def test_a_file_that_is_not_utf8_text_is_not_claimed_undoable(
    tmp_path: Path, world: Path, filesystem: dict[str, Any]
) -> None:
    blob = world / "logo.bin"
    blob.write_bytes(bytes(range(256)) * 4)
    _session(tmp_path, filesystem, [("write_file", {"path": str(blob), "content": "text now\n"})])
    item = json.loads(command("undo", "--dry-run", "--json"))["items"][0]
    # read_text_file cannot give its bytes back: no inverse, rather than "undone" with the bytes mangled
    assert item["verdict"] == "needs_decision" and "bytes that are not UTF-8" in item["detail"]
    assert "new" not in item["detail"]  # the reason of this case only, not the new file's


def test_a_file_written_at_the_moved_name_since_is_not_renamed_by_the_undo(
    tmp_path: Path, world: Path, filesystem: dict[str, Any]
) -> None:
    moved = world / "docs" / "final.txt"
    _session(tmp_path, filesystem, [("move_file", {"source": str(world / "draft.txt"), "destination": str(moved)})])
    moved.write_text("a colleague replaced the moved file with a longer one\n")
    item = refused_undo()[0]  # a refused inverse fails the undo (exit 1)
    assert item["verdict"] == "drifted" and "size changed since the call (read with get_file_info)" in item["detail"]
    assert moved.exists() and not (world / "draft.txt").exists()


def test_the_dry_run_of_a_file_written_twice_expects_the_newer_undo_to_restore_it(
    tmp_path: Path, world: Path, filesystem: dict[str, Any]
) -> None:
    notes = str(world / "notes.txt")
    _session(
        tmp_path,
        filesystem,
        [("write_file", {"path": notes, "content": "one\n"}), ("write_file", {"path": notes, "content": "two\n"})],
    )
    dry = json.loads(command("undo", "--dry-run", "--json"))
    # the older write's state differs now, but undoing the newer write puts it back: not a drift (yet)
    assert [item["verdict"] for item in dry["items"]] == ["would_undo", "would_undo"]
    assert "if undoing the newer calls puts back what it left" in dry["items"][1]["detail"]
    assert [item["verdict"] for item in json.loads(command("undo", "--json"))["items"]] == ["undone", "undone"]
    assert (world / "notes.txt").read_text() == "alpha\nbeta\n"


def test_an_empty_file_comes_back_empty(tmp_path: Path, world: Path, filesystem: dict[str, Any]) -> None:
    empty = world / "empty.txt"
    empty.write_bytes(b"")
    _session(tmp_path, filesystem, [("write_file", {"path": str(empty), "content": "no longer empty\n"})])
    assert [item["verdict"] for item in json.loads(command("undo", "--json"))["items"]] == ["undone"]
    assert empty.read_bytes() == b""


def test_a_moved_file_written_in_the_same_session_is_undone_whole(
    tmp_path: Path, world: Path, filesystem: dict[str, Any]
) -> None:
    before, moved = _tree(world), str(world / "docs" / "final.txt")
    move = {"source": str(world / "draft.txt"), "destination": moved}
    _session(tmp_path, filesystem, [("move_file", move), ("write_file", {"path": moved, "content": "final\n"})])
    assert [item["verdict"] for item in json.loads(command("undo", "--dry-run", "--json"))["items"]] == [
        "would_undo",
        "would_undo",
    ]
    assert [item["verdict"] for item in json.loads(command("undo", "--json"))["items"]] == ["undone", "undone"]
    assert _tree(world) == before


def test_an_edit_dry_run_changed_nothing_and_is_not_undone(
    tmp_path: Path, world: Path, filesystem: dict[str, Any]
) -> None:
    plan = world / "docs" / "plan.md"
    edit = {"path": str(plan), "edits": [{"oldText": "- ship it", "newText": "- wait"}], "dryRun": True}
    _session(tmp_path, filesystem, [("edit_file", edit)])
    plan.write_text("# Plan\n\n- a colleague's edit\n")
    item = json.loads(command("undo", "--json"))["items"][0]
    assert item["verdict"] == "skipped" and "it changed nothing" in item["detail"]
    assert plan.read_text() == "# Plan\n\n- a colleague's edit\n"  # never written over


def test_the_dry_run_still_names_a_drift_no_newer_undo_can_restore(
    tmp_path: Path, world: Path, filesystem: dict[str, Any]
) -> None:
    notes, plan = world / "notes.txt", world / "docs" / "plan.md"
    _session(
        tmp_path,
        filesystem,
        [
            ("write_file", {"path": str(notes), "content": "one\n"}),
            ("write_file", {"path": str(plan), "content": "x\n"}),
        ],
    )
    notes.write_text("a colleague's\n")
    dry = json.loads(command("undo", "--dry-run", "--json"))
    assert [item["verdict"] for item in dry["items"]] == ["would_undo", "drifted"]


def _one_file_story(world: Path) -> list[tuple[str, dict[str, Any]]]:
    """Overwrite a file, edit what was written, then move it: each call builds on the one before."""
    notes, moved = str(world / "notes.txt"), str(world / "docs" / "notes.txt")
    return [
        ("write_file", {"path": notes, "content": "gamma\ndelta\n"}),
        ("edit_file", {"path": notes, "edits": [{"oldText": "delta", "newText": "epsilon"}]}),
        ("move_file", {"source": notes, "destination": moved}),
    ]


def test_overwrite_edit_and_move_of_one_file_are_undone_whole(
    tmp_path: Path, world: Path, filesystem: dict[str, Any]
) -> None:
    before = _tree(world)
    _session(tmp_path, filesystem, _one_file_story(world))
    assert (world / "docs" / "notes.txt").read_text() == "gamma\nepsilon\n"
    report = json.loads(command("undo", "--json"))
    assert [(item["tool"], item["verdict"]) for item in report["items"]] == [
        ("move_file", "undone"),
        ("edit_file", "undone"),
        ("write_file", "undone"),
    ]
    assert report["outcome"]["state"] == "undone"
    assert _tree(world) == before


def test_a_moved_file_changed_afterwards_refuses_the_move_and_leaves_what_it_stood_on(
    tmp_path: Path, world: Path, filesystem: dict[str, Any]
) -> None:
    _session(tmp_path, filesystem, _one_file_story(world))
    (world / "docs" / "notes.txt").write_text("a colleague's longer rewrite of the moved notes\n")
    items = refused_undo()
    assert [(item["tool"], item["verdict"]) for item in items] == [
        ("move_file", "drifted"),
        ("edit_file", "left"),
        ("write_file", "left"),
    ]
    assert "call 3 (move_file)" in items[1]["detail"] and "could not be undone" in items[1]["detail"]
    assert (world / "docs" / "notes.txt").read_text() == "a colleague's longer rewrite of the moved notes\n"
    assert not (world / "notes.txt").exists()


def test_a_move_back_blocked_by_the_sessions_own_new_file_says_so(
    tmp_path: Path, world: Path, filesystem: dict[str, Any]
) -> None:
    notes, moved = str(world / "notes.txt"), str(world / "docs" / "notes.txt")
    _session(
        tmp_path,
        filesystem,
        [
            ("move_file", {"source": notes, "destination": moved}),
            ("write_file", {"path": notes, "content": "a new file at the old name\n"}),
        ],
    )
    items = refused_undo()
    assert [(item["tool"], item["verdict"]) for item in items] == [
        ("write_file", "needs_decision"),
        ("move_file", "failed"),
    ]
    assert "call 2 (write_file) of this session, which has no way back, touches the same thing" in items[1]["detail"]
    assert (world / "notes.txt").read_text() == "a new file at the old name\n"  # nothing overwritten
    assert (world / "docs" / "notes.txt").read_text() == "alpha\nbeta\n"
