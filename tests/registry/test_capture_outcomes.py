"""A capture's outcome chooses the inverse (registry.capture_outcomes): the pack grammar that says so is validated
with path-named errors, becomes the contract's capture fields, and the step's recorded outcome picks the branch."""

from __future__ import annotations

from typing import Any

import pytest

from registry.capture_outcomes import (
    ABSENT,
    FAILED,
    FOUND,
    UNMATCHED,
    effective_contract,
    no_inverse,
    proceeds,
    read_outcome,
    state_of,
)
from registry.contracts import validate_contract
from registry.dry_requests import preview_request
from registry.errors import RegistryError
from registry.packs import PackError, parse_pack

WRITE = {
    "tool": "write_file",
    "capture": {
        "tool": "read_text_file",
        "args": {"path": "$.args.path"},
        "notFound": "^ENOENT",
        "readAfter": True,
    },
    "inverse": {"tool": "write_file", "args": {"path": "$.args.path", "content": "$.pre_state.content"}},
    "ifNotFound": {"class": "C", "reason": "a new file cannot be deleted here"},
    "ifCaptureFailed": {"tool": "log_failure", "args": {"path": "$.args.path"}},
}


def _pack(*entries: dict[str, Any]) -> dict[str, Any]:
    return {"name": "files", "description": "files", "entries": list(entries)}


def _capture(entry: dict[str, Any] = WRITE) -> dict[str, Any]:
    return dict(parse_pack(_pack(entry), "p.json").entries[0].as_mcp_contract_parts()["capture"])


def test_a_pack_entry_with_branches_becomes_the_contracts_capture_fields() -> None:
    assert _capture() == {
        "tool": "read_text_file",
        "arguments": {"path": "${input.path}"},
        "absent_when": "^ENOENT",
        "read_after": True,
        "when_absent": {"class": "C", "reason": "a new file cannot be deleted here"},
        "when_failed": {"tool": "log_failure", "arguments": {"path": "${input.path}"}},
    }


def test_a_branch_without_an_inverse_makes_the_tool_as_guarded_as_it_says() -> None:
    entry = parse_pack(_pack(WRITE), "p.json").entries[0]
    assert entry.guarded_class() == (
        "C",
        "no inverse when the capture finds nothing: a new file cannot be deleted here; otherwise write_file",
    )
    assert entry.needs() == ("read_text_file", "write_file", "log_failure")


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"ifNotFound": {"class": "R", "reason": "r"}}, "entries[0].ifNotFound.class: 'R'"),
        ({"ifNotFound": {"class": "C"}}, "entries[0].ifNotFound: 'reason' is missing"),
        ({"ifNotFound": "delete it"}, 'entries[0].ifNotFound: a call {"tool", "args"} or no inverse'),
        (
            {"ifNotFound": {"tool": "w", "args": {"c": "$.pre_state.content"}}},
            "entries[0].ifNotFound.args.c: '$.pre_state.content' reads $.pre_state, which this branch does not have",
        ),
        ({"capture": {**WRITE["capture"], "notFound": "(unclosed"}}, "entries[0].capture.notFound: '(unclosed'"),
        (
            {"capture": {**WRITE["capture"], "readAfter": "yes"}},
            "entries[0].capture.readAfter: true (read the capture again",
        ),
        ({"capture": {**WRITE["capture"], "retries": 3}}, "entries[0].capture: unknown key 'retries'"),
        (
            {"capture": {"tool": "read_text_file", "args": {"path": "$.args.path"}}},
            "entries[0].ifNotFound: nothing can make the capture find nothing",
        ),
    ],
)
def test_a_bad_branch_or_capture_is_refused_naming_the_path(change: dict[str, Any], expected: str) -> None:
    with pytest.raises(PackError) as refused:
        parse_pack(_pack({**WRITE, **change}), "bad.json")
    assert f"bad.json: {expected}" in refused.value.message


def test_a_branch_without_a_capture_is_refused() -> None:
    entry = {"tool": "t", "inverse": {"tool": "u", "args": {}}, "ifCaptureFailed": {"class": "C", "reason": "r"}}
    with pytest.raises(PackError, match="the entry declares no capture"):
        parse_pack(_pack(entry), "bad.json")


@pytest.mark.parametrize(
    ("is_error", "text", "outcome"),
    [
        (False, "hello", FOUND),
        (True, "ENOENT: no such file or directory, open '/w/x'", ABSENT),
        (True, "Access denied - path outside allowed directories", FAILED),
    ],
)
def test_the_outcome_of_a_read(is_error: bool, text: str, outcome: str) -> None:
    read = read_outcome(_capture(), is_error=is_error, text=text, payload={"content": text})
    assert read.outcome == outcome
    assert proceeds(_capture(), read)  # both branches are declared: the call is sent either way


def test_a_prose_read_is_its_named_groups_and_no_match_is_unmatched() -> None:
    capture = {"tool": "git_status", "text_pattern": "^On branch (?P<branch>\\S+)$"}
    status = "Repository status:\nOn branch main\nnothing to commit"
    assert read_outcome(capture, is_error=False, text=status, payload=None).state == {"branch": "main"}
    detached = read_outcome(capture, is_error=False, text="HEAD detached at 1a2b3c4", payload=None)
    assert detached.outcome == UNMATCHED and not proceeds(capture, detached)  # no branch: the call is not sent
    assert state_of(capture, text=status, payload=None) == {"branch": "main"}


def test_the_recorded_outcome_picks_the_inverse_and_the_pinned_contract_stays() -> None:
    contract = {"compensation": {"tool": "write_file", "arguments": {}}, "capture": _capture()}
    assert effective_contract(contract, {"result": {}}) is contract
    absent = effective_contract(contract, {"capture_outcome": "absent"})
    assert "compensation" not in absent and "compensation" in contract
    assert no_inverse(contract, {"capture_outcome": "absent"}).reason == "a new file cannot be deleted here"  # type: ignore[union-attr]
    failed = effective_contract(contract, {"capture_outcome": "failed"})
    assert failed["compensation"] == {"tool": "log_failure", "arguments": {"path": "${input.path}"}}


def _mcp_contract(capture: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": "files.write",
        "version": "1.0.0",
        "kind": "mcp",
        "description": "write a file",
        "semantic": {"domain": "files", "operation": "write", "resource": "file", "risk": "low"},
        "input_schema": {"type": "object"},
        "server": {"command": "files-server"},
        "forward": {"tool": "write_file", "arguments": "${input}"},
        "capture": capture,
    }


@pytest.mark.parametrize(
    ("capture", "expected"),
    [
        ({"tool": "read", "when_absent": {"class": "C", "reason": "r"}}, "nothing can make the read absent"),
        ({"tool": "read", "text_pattern": "(?P<x"}, "capture.text_pattern: '(?P<x' is not a regular expression"),
        (
            {"tool": "read", "absent_when": "x", "when_absent": {"tool": "t", "arguments": {"a": "${pre_state.a}"}}},
            "capture.when_absent.arguments.a",
        ),
    ],
)
def test_a_registry_contracts_capture_is_checked_the_same_way(capture: dict[str, Any], expected: str) -> None:
    with pytest.raises(RegistryError) as refused:
        validate_contract(_mcp_contract(capture), "actions[0]")
    assert any(expected in problem for problem in refused.value.problems), refused.value.problems


def test_a_preview_shows_the_capture_read_and_leaves_its_branches_for_the_undo() -> None:
    capture = {
        "tool": "read_text_file",
        "arguments": {"path": "${input.path}"},
        "absent_when": "^ENOENT",
        "when_absent": {"tool": "move_file", "arguments": {"source": "${result.path}"}},
    }
    request = preview_request(_mcp_contract(capture), input={"path": "/w/a.txt"}, saga_id="s", step_id="t")
    assert request["capture"] == {"tool": "read_text_file", "arguments": {"path": "/w/a.txt"}}


def test_an_inverse_may_read_only_the_groups_a_prose_capture_names() -> None:
    entry = {
        "tool": "git_checkout",
        "capture": {"tool": "git_status", "args": {"repo_path": "$.args.repo_path"}, "textPattern": "^On (?P<br>\\S+)"},
        "inverse": {"tool": "git_checkout", "args": {"branch_name": "$.pre_state.branch"}},
        "ifNotFound": {"class": "C", "reason": "detached"},
    }
    with pytest.raises(PackError) as refused:
        parse_pack(_pack(entry), "git.json")
    assert (
        "git.json: entries[0].inverse.args.branch_name: '$.pre_state.branch' reads a group capture.textPattern does "
        "not name (its named groups: br)" in refused.value.message
    )


def test_a_read_after_of_its_own_becomes_the_contracts_read_after() -> None:
    after = {
        "tool": "git_log",
        "args": {"repo_path": "$.args.repo_path", "n": {"const": 1}},
        "textPattern": "^C (?P<c>\\w+)",
    }
    entry = {**WRITE, "capture": {**WRITE["capture"], "readAfter": after}}
    assert _capture(entry)["read_after"] == {
        "tool": "git_log",
        "arguments": {"repo_path": "${input.repo_path}", "n": 1},
        "text_pattern": "^C (?P<c>\\w+)",
    }
    assert parse_pack(_pack(entry), "p.json").entries[0].needs() == (
        "read_text_file",
        "git_log",
        "write_file",
        "log_failure",
    )


def test_an_inverse_reads_a_prose_group_whole() -> None:
    entry = {
        "tool": "git_checkout",
        "capture": {"tool": "git_status", "args": {}, "textPattern": "^On branch (?P<branch>\\S+)"},
        "inverse": {"tool": "git_checkout", "args": {"branch_name": "$.pre_state.branch.name"}},
        "ifNotFound": {"class": "C", "reason": "detached"},
    }
    with pytest.raises(PackError, match="reads inside the group 'branch', which is text; read it whole"):
        parse_pack(_pack(entry), "git.json")
