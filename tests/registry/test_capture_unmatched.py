"""A capture that answered text its pattern does not match has an outcome of its own, `unmatched`
(registry.capture_outcomes): a pack answers it with `ifNoMatch` (the contract's `when_unmatched`), validated like the
other branches; without one it falls back to `ifNotFound` / `when_absent`, so packs and steps journaled before it
existed keep meaning what they meant."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from registry.capture_outcomes import ABSENT, UNMATCHED, effective_contract, no_inverse, proceeds, read_outcome
from registry.contracts import validate_contract
from registry.errors import RegistryError
from registry.packs import PackError, load_packs, parse_pack

BUILTIN_PACKS = Path(__file__).resolve().parents[2] / "registry" / "builtin_packs"
WRITE = {
    "tool": "write_file",
    "capture": {
        "tool": "read_text_file",
        "args": {"path": "$.args.path"},
        "notFound": "^ENOENT",
        "textPattern": "\\A(?P<content>[^\ufffd]*)\\Z",
    },
    "inverse": {"tool": "write_file", "args": {"path": "$.args.path", "content": "$.pre_state.content"}},
    "ifNotFound": {"class": "C", "reason": "the file was new"},
    "ifNoMatch": {"class": "C", "reason": "its text held U+FFFD"},
}


def _pack(*entries: dict[str, Any]) -> dict[str, Any]:
    return {"name": "files", "description": "files", "entries": list(entries)}


def _contract(entry: dict[str, Any] = WRITE) -> dict[str, Any]:
    return dict(parse_pack(_pack(entry), "p.json").entries[0].as_mcp_contract_parts())


def test_a_read_its_pattern_does_not_match_is_unmatched_and_an_error_it_names_is_absent() -> None:
    capture = _contract()["capture"]
    assert read_outcome(capture, is_error=False, text="bytes \ufffd here", payload=None).outcome == UNMATCHED
    assert read_outcome(capture, is_error=True, text="ENOENT: no such file", payload=None).outcome == ABSENT
    assert read_outcome(capture, is_error=False, text="plain", payload=None).state == {"content": "plain"}


def test_each_outcome_takes_its_own_branch_and_says_its_own_reason() -> None:
    contract = _contract()
    assert contract["capture"]["when_unmatched"] == {"class": "C", "reason": "its text held U+FFFD"}
    assert no_inverse(contract, {"capture_outcome": "unmatched"}).reason == "its text held U+FFFD"  # type: ignore[union-attr]
    assert no_inverse(contract, {"capture_outcome": "absent"}).reason == "the file was new"  # type: ignore[union-attr]


def test_without_its_own_branch_unmatched_falls_back_to_the_not_found_one() -> None:
    # given a pack written before ifNoMatch existed: its ifNotFound answered both cases
    entry = {key: value for key, value in WRITE.items() if key != "ifNoMatch"}
    contract = _contract(entry)
    unmatched = read_outcome(contract["capture"], is_error=False, text="\ufffd", payload=None)
    # then the call is still sent, and its undo takes ifNotFound, as it did
    assert proceeds(contract["capture"], unmatched)
    assert no_inverse(contract, {"capture_outcome": "unmatched"}).reason == "the file was new"  # type: ignore[union-attr]
    assert "compensation" not in effective_contract(contract, {"capture_outcome": "unmatched"})


def test_a_step_journaled_absent_before_unmatched_existed_still_takes_when_absent() -> None:
    # a step whose unmatched read was recorded "absent" keeps the branch it had, even under a contract that now
    # declares when_unmatched
    assert no_inverse(_contract(), {"capture_outcome": "absent"}).reason == "the file was new"  # type: ignore[union-attr]


def test_an_unmatched_read_with_a_call_as_its_branch_sends_that_call() -> None:
    entry = {**WRITE, "ifNoMatch": {"tool": "log_binary", "args": {"path": "$.args.path", "said": "$.result.ok"}}}
    contract = _contract(entry)
    chosen = effective_contract(contract, {"capture_outcome": "unmatched"})
    assert chosen["compensation"] == {
        "tool": "log_binary",
        "arguments": {"path": "${input.path}", "said": "${result.ok}"},
    }
    assert parse_pack(_pack(entry), "p.json").entries[0].needs() == ("read_text_file", "write_file", "log_binary")


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (
            {"capture": {"tool": "read_text_file", "args": {"path": "$.args.path"}, "notFound": "^ENOENT"}},
            "entries[0].ifNoMatch: nothing can leave the capture unmatched; add capture.textPattern",
        ),
        ({"ifNoMatch": {"class": "R", "reason": "r"}}, "entries[0].ifNoMatch.class: 'R'"),
        ({"ifNoMatch": {"class": "C"}}, "entries[0].ifNoMatch: 'reason' is missing"),
        (
            {"ifNoMatch": {"tool": "w", "args": {"c": "$.pre_state.content"}}},
            "entries[0].ifNoMatch.args.c: '$.pre_state.content' reads $.pre_state, which this branch does not have",
        ),
    ],
)
def test_a_bad_no_match_branch_is_refused_naming_the_path(change: dict[str, Any], expected: str) -> None:
    with pytest.raises(PackError) as refused:
        parse_pack(_pack({**WRITE, **change}), "bad.json")
    assert f"bad.json: {expected}" in refused.value.message


def test_a_contracts_when_unmatched_needs_a_text_pattern() -> None:
    contract = {
        "id": "files.write",
        "version": "1.0.0",
        "kind": "mcp",
        "description": "write a file",
        "semantic": {"domain": "files", "operation": "write", "resource": "file", "risk": "low"},
        "input_schema": {"type": "object"},
        "server": {"transport": "stdio", "command": "files-server"},
        "forward": {"tool": "write_file", "arguments": "${input}"},
        "capture": {"tool": "read", "absent_when": "x", "when_unmatched": {"class": "C", "reason": "r"}},
    }
    with pytest.raises(RegistryError) as refused:
        validate_contract(contract, "actions[0]")
    assert refused.value.problems == [
        "actions[0].capture.when_unmatched: nothing can leave the read unmatched; add text_pattern"
    ]


def test_the_gate_names_every_outcome_without_an_inverse() -> None:
    entry = parse_pack(_pack(WRITE), "p.json").entries[0]
    assert entry.guarded_class() == (
        "C",
        "no inverse when the capture finds nothing: the file was new; nor when the capture's text does not match its "
        "pattern: its text held U+FFFD; otherwise write_file",
    )


def test_the_filesystem_packs_reasons_each_name_one_case() -> None:
    packs = load_packs([BUILTIN_PACKS / "filesystem.json"])
    write = packs.inverse_for("fs", "write_file")
    edit = packs.inverse_for("fs", "edit_file")
    assert write is not None and edit is not None
    new_file, not_utf8 = (branch.reason for branch in (write.branches["ifNotFound"], write.branches["ifNoMatch"]))  # type: ignore[union-attr]
    assert "ENOENT" in new_file and "U+FFFD" not in new_file
    assert "U+FFFD" in not_utf8 and "new" not in not_utf8
    assert set(edit.branches) == {"ifNoMatch"}  # an edit of a file that does not exist fails its capture: not sent
