"""The drift check of a proxy session's undo (sagas.coordinator._undo_walk): before an inverse runs, the state its
capture read is read again (the capture tool, key `<step id>:drift`) and compared with what the call left: the
state read right after the call (`post_state`: every captured proxied call is read again after it, unless its pack
says `readAfter: false`). A step journaled without that read (an older journal, a registered `kind: mcp` action) is
compared with what its inverse implies (an inverse that creates the thing again: the call left it absent, whatever its
answer echoed) or else the result's values for the captured fields.
A difference means someone else changed it since, and the inverse is refused unless `force`. A capture declared
`read_after` kept the state read right after the call (`post_state`), and that is what the read must find; a prose
capture (`text_pattern`) without it is not compared (its answer has no fields to compare); a capture that found
nothing (its outcome's branch undoes the call) has no state of before to protect.

When the state cannot be read at all (the server is unreachable, or does not start from here), that is not a drift:
the inverse is not sent, `--force` does not skip it, and the operator is told to make the server reachable. Each
read carries a key of its own (`<step id>:drift:<nonce>`): a server that answers a repeated key with its first answer
must not hand an undo the state an earlier dry run saw.

An inverse that was already sent once (its walk died or failed after sending it) may have been applied: the state
the inverse restores (the captured pre-state) is then expected too, and the inverse is sent again with the same
`<step id>:rollback` key, which the downstream answers without acting twice.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from registry.actions import InvocationContext
from registry.capture_outcomes import FOUND, POST_STATE, after_read, outcome_of, state_of
from registry.errors import ActionFailure
from registry.templating import render
from registry.tool_answers import text_of
from registry.tool_classes import name_words
from sagas import executor
from sagas.models import Step
from sagas.selectors.undo_plan import step_contract

_ABSENT = object()  # the capture read finds nothing: the thing does not exist (now)
# The first word of an inverse that brings a removed thing back: its call removed it.
RECREATING_VERBS = frozenset({"create", "add", "insert", "new", "restore", "recreate", "undelete", "put"})


@dataclass(frozen=True)
class Drift:
    """Why the inverse must not run now: the state changed since the call, or it could not be read."""

    reason: str
    unreadable: bool = False


def drift(step: Step) -> Drift | None:
    """Why the current state is not what `step` left (None when it is, or when there is no capture to compare)."""
    capture = step.action_definition.get("capture")
    stored = step.result if isinstance(step.result, dict) else {}
    pre_state = stored.get("pre_state")
    made = step.action_definition.get("read_after")
    if not isinstance(capture, dict) and isinstance(made, dict) and POST_STATE in stored:
        return _drift_from_read_after(step, _made_read(made, step, stored), stored)  # a create: what it made
    if not isinstance(capture, dict) or outcome_of(stored) != FOUND:
        return None  # no capture, or it found nothing: there is no state of before to restore over a newer one
    if POST_STATE in stored:
        return _drift_from_read_after(step, capture, stored)
    if not isinstance(pre_state, dict) or "text_pattern" in capture:
        return None  # a prose read is only compared with the read after the call (read_after): its answer has no fields
    current, unreadable = _read_now(step, capture)
    if unreadable:
        return Drift(unreadable, unreadable=True)
    left = None if _inverse_recreates(step) else _left_by(stored.get("result"), pre_state)
    if _matches(current, left) or (step.compensation_attempts > 0 and _matches(current, pre_state)):
        return None
    if current is _ABSENT:
        return Drift(f"{capture['tool']} no longer finds it, though the call had left it")
    if left is None:
        return Drift(f"{capture['tool']} finds it again, though the call had removed it")
    changed = sorted(key for key, value in left.items() if _field(current, key) != value)
    return Drift(f"{', '.join(changed)} changed since the call (read with {capture['tool']})")


def _drift_from_read_after(step: Step, capture: dict[str, Any], stored: dict[str, Any]) -> Drift | None:
    """The capture declared `read_after`: the state read right after the call is what the undo expects now."""
    read = after_read(capture) or capture
    current, unreadable = _read_now(step, read)
    if unreadable:
        return Drift(unreadable, unreadable=True)
    now = None if current is _ABSENT else current  # the read after keeps an error answer (absent) as null
    if now == stored[POST_STATE] or (step.compensation_attempts > 0 and now == stored.get("pre_state")):
        return None
    if current is _ABSENT:
        return Drift(f"{read['tool']} no longer finds it, though the call had left it")
    if stored[POST_STATE] is None:
        return Drift(f"{read['tool']} finds it again, though the call had removed it")
    left = stored[POST_STATE]
    if isinstance(now, dict) and isinstance(left, dict):
        changed = sorted(key for key in {*now, *left} if now.get(key, _ABSENT) != left.get(key, _ABSENT))
        return Drift(f"{', '.join(changed)} changed since the call (read with {read['tool']})")
    return Drift(f"{read['tool']} reads it otherwise than the call left it")


def _read_now(step: Step, capture: dict[str, Any]) -> tuple[object, str]:
    """The captured thing as it is now (_ABSENT when the tool answers an error), or why it could not be read."""
    outcome = executor.perform(
        _read_definition(step.action_definition, capture), _read_context(step), compensation=False
    )
    if outcome.ok:
        answer = outcome.result or {}
        return state_of(capture, text=text_of(answer), payload=answer.get("result")), ""
    error = outcome.error or {}
    if error.get("code") == "MCP_TOOL_ERROR":
        return _ABSENT, ""
    return None, f"the current state could not be read with {capture['tool']} ({error.get('message', 'unknown error')})"


def _matches(current: object, expected: dict[str, Any] | None) -> bool:
    """`expected` None means "absent"; otherwise every expected field has its value in `current`."""
    if expected is None:
        return current is _ABSENT
    return current is not _ABSENT and all(_field(current, key) == value for key, value in expected.items())


def _field(current: object, key: str) -> Any:
    return current.get(key, _ABSENT) if isinstance(current, dict) else _ABSENT


def _left_by(result: Any, pre_state: dict[str, Any]) -> dict[str, Any] | None:
    """What a call journaled without the read after it (an older step, a registered `kind: mcp` action) left of the
    captured fields: the result's values when it answers all of them (an update answers the thing as it is now),
    else None, meaning the thing is gone (a delete answers {"deleted": true}). A call whose inverse recreates the
    thing is never read this way (_inverse_recreates)."""
    if isinstance(result, dict) and all(key in result for key in pre_state):
        return {key: result[key] for key in pre_state}
    return None


def _made_read(made: dict[str, Any], step: Step, stored: dict[str, Any]) -> dict[str, Any]:
    """A create's read of what it made, its arguments rendered here from the call's input and answer (the read is
    sent as a plain call, whose arguments may read only the input)."""
    scope = {"input": step.input, "result": stored.get("result")}
    try:
        arguments = render(made.get("arguments", {}), scope, "read_after.arguments")
    except ActionFailure:
        arguments = {}  # the answer lacks what the read needs: read with nothing, which reads otherwise
    return {**made, "arguments": arguments}


def _inverse_recreates(step: Step) -> bool:
    """Whether the call's inverse creates the thing again (create_contact undoes delete_contact): then the call
    left the thing absent, whatever its answer echoes (many servers answer a delete with the row they deleted)."""
    compensation = step_contract(step).get("compensation")
    tool = compensation.get("tool") if isinstance(compensation, dict) else None
    words = name_words(tool) if isinstance(tool, str) else []
    return bool(words) and words[0] in RECREATING_VERBS


def _read_definition(snapshot: dict[str, Any], capture: dict[str, Any]) -> dict[str, Any]:
    """The step's own contract, with its capture read as the only call (so it reaches the same server)."""
    kept = {key: value for key, value in snapshot.items() if key not in ("proxy", "compensation", "capture")}
    return {**kept, "forward": {"tool": capture["tool"], "arguments": capture.get("arguments", {})}}


def _read_context(step: Step) -> InvocationContext:
    return InvocationContext(
        saga_id=str(step.saga_id),
        step_id=str(step.id),
        idempotency_key=f"{step.id}:drift:{uuid.uuid4().hex[:12]}",
        input=step.input,
    )
