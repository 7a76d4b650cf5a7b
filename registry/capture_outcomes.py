"""What a capture read found, and the inverse that follows from it.

A `kind: mcp` contract's `capture` (and a compensation pack entry's, which becomes one) may say more than "read
this before the call":

    "capture": {"tool": "read_text_file", "arguments": {"path": "${input.path}"},
                "absent_when": "ENOENT",                 # an error answer whose text matches: the thing is absent
                "text_pattern": "On branch (?P<branch>\\S+)",  # a prose answer: its named groups are the state
                "read_after": true,                      # read again after the call: what the undo compares with
                                                         # (the default; or a read of its own: {"tool", "arguments",
                                                         # "text_pattern"}; false: not read after)
                "when_absent": {"tool": ..., "arguments": ...} | {"class": "C", "reason": "..."},
                "when_unmatched": {"tool": ..., "arguments": ...} | {"class": "C", "reason": "..."},
                "when_failed": {"tool": ..., "arguments": ...} | {"class": "C", "reason": "..."}}

The read ends in one of four outcomes:

    found      it answered (and its text matched `text_pattern`, when there is one): the contract's own
               `compensation` undoes the call, reading `${pre_state.x}`
    absent     it answered an error matching `absent_when`: `when_absent` says what undoes the call (another call,
               or no inverse with its class and reason)
    unmatched  it answered, but its text does not match `text_pattern` (a detached HEAD, a file holding U+FFFD):
               `when_unmatched`, or `when_absent` when the contract has no `when_unmatched`
    failed     any other error: the call is refused (nothing is sent) unless `when_failed` says what then

Without a `when_*` branch for its outcome the call is not sent, as before. The outcome is kept in the step's result
(`capture_outcome`, omitted when found), so the undo picks the same branch from the journal however long after.
`unmatched` was told apart from `absent` later: a step journaled before keeps `absent` for both, and still takes
`when_absent`, as an unmatched read of a contract without `when_unmatched` does; so each branch's reason can name
the one case it answers, and a contract (or pack) written before still means what it meant.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

CaptureOutcome = Literal["found", "absent", "unmatched", "failed"]
FOUND: CaptureOutcome = "found"
ABSENT: CaptureOutcome = "absent"
UNMATCHED: CaptureOutcome = "unmatched"
FAILED: CaptureOutcome = "failed"
# The outcomes a step records (found is left out), and the branch each takes.
BRANCH_OF: dict[str, str] = {ABSENT: "when_absent", UNMATCHED: "when_unmatched", FAILED: "when_failed"}
# The branch an outcome falls back to when the contract does not declare its own.
FALLBACK: dict[str, str] = {UNMATCHED: ABSENT}
OUTCOME_KEY = "capture_outcome"
# Where a step keeps the state its capture tool read right after the call (`read_after`).
POST_STATE = "post_state"


@dataclass(frozen=True)
class CaptureRead:
    """What the capture read found: its outcome, and the state (None unless found)."""

    outcome: CaptureOutcome
    state: Any = None

    @property
    def found(self) -> bool:
        return self.outcome == FOUND


@dataclass(frozen=True)
class NoInverse:
    """A branch saying the call has no inverse in this outcome: its class (C or I) and why."""

    effect_class: str
    reason: str


def read_outcome(capture: Mapping[str, Any], *, is_error: bool, text: str, payload: Any) -> CaptureRead:
    """The outcome of a capture read that answered: `text` is its answer's text, `payload` its JSON payload."""
    if is_error:
        pattern = capture.get("absent_when")
        if isinstance(pattern, str) and re.search(pattern, text):
            return CaptureRead(ABSENT)
        return CaptureRead(FAILED)
    state = state_of(capture, text=text, payload=payload)
    if state is None and isinstance(capture.get("text_pattern"), str):
        return CaptureRead(UNMATCHED)  # an answer its pattern does not match
    return CaptureRead(FOUND, state)


def state_of(capture: Mapping[str, Any], *, text: str, payload: Any) -> Any:
    """The state a successful read of `capture`'s tool shows (a later read: the drift check, `read_after`), by the
    same rule as the capture: the named groups of `text_pattern` when there is one (None: no match)."""
    pattern = capture.get("text_pattern")
    if not isinstance(pattern, str):
        return payload
    match = re.search(pattern, text, re.MULTILINE)
    return match.groupdict() if match else None


def after_read(capture: Mapping[str, Any]) -> dict[str, Any] | None:
    """The read made right after the call and again by the undo's drift check (`read_after`): the capture itself
    (`true`, and by default: what a call left is read, never guessed from its own answer, which may echo a row it
    deleted), a read of its own (`{"tool", "arguments", "text_pattern"}`), or None (`false`: not read after)."""
    spec = capture.get("read_after", True)
    if spec is True:
        return {key: capture[key] for key in ("tool", "arguments", "text_pattern") if key in capture}
    return dict(spec) if isinstance(spec, Mapping) else None


def reads_itself_after(capture: Mapping[str, Any]) -> bool:
    """Whether the read after the call is the capture read itself (so the two reads can be compared)."""
    return capture.get("read_after", True) is True


def proceeds(capture: Mapping[str, Any], read: CaptureRead) -> bool:
    """Whether the call is sent after this read: found, or its outcome has a branch."""
    return read.found or branch_for(capture, read.outcome) is not None


def outcome_of(receipt: Any) -> CaptureOutcome:
    stored = receipt.get(OUTCOME_KEY) if isinstance(receipt, Mapping) else None
    return stored if stored in BRANCH_OF else FOUND


def branch_for(capture: Mapping[str, Any], outcome: str) -> dict[str, Any] | None:
    """The `when_*` branch that answers `outcome` (its own, else the one it falls back to), or None."""
    for candidate in (outcome, FALLBACK.get(outcome)):
        chosen = capture.get(BRANCH_OF[candidate]) if candidate in BRANCH_OF else None
        if isinstance(chosen, Mapping):
            return dict(chosen)
    return None


def branch(contract: Mapping[str, Any], receipt: Any) -> dict[str, Any] | None:
    """The `when_*` branch the step's recorded capture outcome chose, or None (found, or no capture)."""
    capture = contract.get("capture")
    outcome = outcome_of(receipt)
    if outcome == FOUND or not isinstance(capture, Mapping):
        return None
    return branch_for(capture, outcome)


def effective_contract(contract: dict[str, Any], receipt: Any) -> dict[str, Any]:
    """The contract as its undo applies to this step: its `compensation` replaced by the chosen branch's call, or
    removed when the branch says there is no inverse. The pinned contract itself is never changed."""
    chosen = branch(contract, receipt)
    if chosen is None:
        return contract
    rest = {key: value for key, value in contract.items() if key != "compensation"}
    return {**rest, "compensation": chosen} if "tool" in chosen else rest


def no_inverse(contract: Mapping[str, Any], receipt: Any) -> NoInverse | None:
    """The branch's "no inverse" (class and reason) when the recorded outcome chose one."""
    chosen = branch(contract, receipt)
    if chosen is None or "tool" in chosen:
        return None
    return NoInverse(str(chosen.get("class", "C")), str(chosen.get("reason", "")))


def branch_problems(capture: Mapping[str, Any], where: str) -> list[str]:
    """Validation of a contract capture's outcome fields (patterns compile, branches are calls or declarations)."""
    problems = []
    for key in ("absent_when", "text_pattern"):
        if key in capture:
            problems += pattern_problems(capture[key], f"{where}.{key}")
    after = capture.get("read_after")
    if isinstance(after, Mapping) and "text_pattern" in after:
        problems += pattern_problems(after["text_pattern"], f"{where}.read_after.text_pattern")
    for key in BRANCH_OF.values():
        chosen = capture.get(key)
        if key in capture and not (isinstance(chosen, dict) and ("tool" in chosen) != ("class" in chosen)):
            problems.append(
                f'{where}.{key}: either a call {{"tool", "arguments"}} or no inverse {{"class": "C" or "I", '
                '"reason"}}'
            )
    if "when_absent" in capture and not ({"absent_when", "text_pattern"} & capture.keys()):
        problems.append(
            f"{where}.when_absent: nothing can make the read absent; add absent_when (a pattern over the error's "
            "text) or text_pattern"
        )
    if "when_unmatched" in capture and "text_pattern" not in capture:
        problems.append(f"{where}.when_unmatched: nothing can leave the read unmatched; add text_pattern")
    return problems


def pattern_problems(pattern: Any, where: str) -> list[str]:
    if not isinstance(pattern, str) or not pattern:
        return [f"{where}: a regular expression (Python syntax)"]
    try:
        re.compile(pattern)
    except re.error as bad:
        return [f"{where}: {pattern!r} is not a regular expression ({bad}); fix it"]
    return []
