"""Undo of a proxy session (`semantic-saga undo`): walk its proxied calls newest-first and put the world back.

    R (a declared inverse in the step's snapshot)  -> the inverse runs as a journaled compensation, with the
                                                      step's rollback idempotency key `<step id>:rollback`
    C                                              -> listed: only an operator can decide on a correction
    I, unknown, an R without an inverse            -> listed: no way back
    reads, refused, dry and failed-not-sent calls  -> skipped: nothing in the world to undo

Where the call's inverse has a capture, the state is read again first (the capture tool, key `<step id>:drift`)
and compared with what the step left: the result's values for the captured fields, or, when the result does not
carry them (a delete), the thing being absent. A difference means someone else changed it since: that inverse is
refused (STATE_DRIFTED) unless `force`. The first inverse refused or failed stops the walk; the session ends
ROLLBACK_FAILED with the failure, and what is left is listed. Run it again to retry from there.

The walk uses the coordinator's rollback (sagas.coordinator.rollback): the session becomes FAILED, then
ROLLING_BACK under the runner's fenced lease, each inverse is claimed, called and recorded by the same functions a
saga rollback uses, and the session ends ROLLED_BACK or ROLLBACK_FAILED. With `to_checkpoint` only the calls made
after that checkpoint are walked. A dry run decides and reads (the drift check) but changes nothing.
"""

from __future__ import annotations

import uuid
from dataclasses import asdict, dataclass
from typing import Any

from governance.identity.principal import Principal
from governance.identity.rbac import EXECUTE, authorize
from registry.actions import InvocationContext
from registry.contracts import has_compensation
from registry.errors import ActionFailure
from registry.templating import render
from sagas import executor
from sagas.coordinator import rollback
from sagas.coordinator._proxy_contract import is_proxy_session
from sagas.coordinator._tx import locked_saga
from sagas.coordinator.leases import LeaseRef, heartbeat
from sagas.errors import InvalidInput, InvalidTransition
from sagas.models import Checkpoint, Saga, Step
from sagas.selectors.proxy_ledger import session_checkpoint
from sagas.selectors.scope import tenant_saga
from sagas.states import StepStatus

NOT_SENT = frozenset({StepStatus.REFUSED, StepStatus.DRY})


@dataclass(frozen=True)
class UndoItem:
    """What the walk did (or, in a dry run, would do) with one proxied call."""

    seq: int
    step_id: str
    tool: str
    server: str
    effect_class: str
    # undone | would_undo | needs_decision | no_way_back | skipped | already_undone | drifted | failed | left
    verdict: str
    detail: str
    inverse: dict[str, Any] | None = None  # {"tool", "arguments"} when an inverse is declared


@dataclass(frozen=True)
class UndoReport:
    saga_id: str
    status: str  # the session's status afterwards (unchanged by a dry run)
    dry_run: bool
    checkpoint: str
    items: tuple[UndoItem, ...]

    def as_json(self) -> dict[str, Any]:
        return {**asdict(self), "items": [asdict(item) for item in self.items]}


def proxy_session_undo(
    *, actor: Principal, saga_id: object, to_checkpoint: str = "", dry_run: bool = False, force: bool = False
) -> UndoReport:
    """Undo the session's calls (after `to_checkpoint`, when given), newest-first, as the module docstring says.

    Errors: NOT_A_PROXY_SESSION, CHECKPOINT_NOT_FOUND, ROLLBACK_REFUSED (committed or already rolled back),
    UNDO_BUSY (a call is still in flight, or another rollback runs).
    """
    authorize(actor, EXECUTE, "rollback")
    saga = tenant_saga(actor, saga_id)
    if not is_proxy_session(saga):
        raise InvalidInput("NOT_A_PROXY_SESSION", f"Saga {saga.id} is not a proxy session; nothing was undone.")
    checkpoint = session_checkpoint(actor=actor, saga=saga, label=to_checkpoint) if to_checkpoint else None
    steps = _steps_newest_first(saga, checkpoint)
    if dry_run:
        items = tuple(_dry(step, force) for step in steps)
        return UndoReport(str(saga.id), saga.status, True, to_checkpoint, items)
    if rollback.in_flight(saga):
        raise InvalidTransition(
            "UNDO_BUSY",
            f"Session {saga.id} has a call in flight, so nothing was undone and nothing changed. Run the undo "
            "again once the call has finished (`semantic-saga ledger` shows it as executing until then).",
        )
    pk = rollback._request(actor, saga.id)
    fence = rollback._start(actor, pk)
    if fence is None:
        raise InvalidTransition(
            "UNDO_BUSY",
            f"Session {saga.id} has a call in flight or another rollback running, so the undo did not start (the "
            "session is now FAILED, waiting to be rolled back). Run the undo again once the call has finished.",
        )
    with heartbeat(LeaseRef(Saga, pk, fence)):
        items = tuple(_walk(actor, pk, fence, steps, force))
        finished = rollback._finish(actor, pk, fence)
    return UndoReport(str(saga.id), finished.status, False, to_checkpoint, items)


def _steps_newest_first(saga: Saga, checkpoint: Checkpoint | None) -> list[Step]:
    steps = Step.objects.filter(saga=saga, action__startswith="proxy.").order_by("-sequence")
    if checkpoint is not None:
        steps = steps.filter(created_at__gt=checkpoint.created_at)
    return list(steps)


def _walk(actor: Principal, pk: uuid.UUID, fence: int, steps: list[Step], force: bool) -> list[UndoItem]:
    items: list[UndoItem] = []
    stopped = False
    for step in steps:
        verdict, detail = _verdict(step)
        if verdict != "would_undo":
            items.append(_item(step, verdict, detail))
            continue
        if stopped:
            items.append(_item(step, "left", "not undone: the walk stopped at a newer call's inverse"))
            continue
        drift = _drift(step) if not force else ""
        if drift:
            _refuse_drifted(actor, pk, step, drift)
            items.append(_item(step, "drifted", f"inverse refused: {drift}; undo --force runs it anyway"))
            stopped = True
            continue
        rollback._compensate(actor, pk, step.id, fence)
        step.refresh_from_db()
        if step.status == StepStatus.COMPENSATED:
            items.append(_item(step, "undone", "its inverse ran"))
        else:
            error = step.compensation_error or {}
            items.append(_item(step, "failed", f"its inverse failed: {error.get('message', step.status)}"))
            stopped = True
    return items


def _dry(step: Step, force: bool) -> UndoItem:
    verdict, detail = _verdict(step)
    if verdict == "would_undo" and not force and (drift := _drift(step)):
        return _item(step, "drifted", f"its inverse would be refused: {drift}; undo --force would run it")
    return _item(step, verdict, detail)


def _verdict(step: Step) -> tuple[str, str]:
    """What the walk does with `step`, before any call."""
    effect_class = _proxy(step).get("class", "unknown")
    if step.status == StepStatus.COMPENSATED:
        return "already_undone", "undone by an earlier rollback"
    if step.status in NOT_SENT:
        return "skipped", f"{step.status.lower()}: it never reached the world"
    if step.status == StepStatus.FAILED and not step.uncertain_outcome:
        return "skipped", "failed: the tool answered an error or the call was never sent"
    if effect_class == "read":
        return "skipped", "a read: nothing to undo"
    if has_compensation(step.action_definition):
        return "would_undo", "its inverse would run"
    if effect_class == "C":
        return "needs_decision", "cannot be undone, only corrected afterwards: an operator decides what to do"
    if effect_class == "I":
        return "no_way_back", "irreversible: no way back once executed"
    return "no_way_back", f"class {effect_class}: no inverse is declared (add a pack entry to make it undoable)"


def _item(step: Step, verdict: str, detail: str) -> UndoItem:
    proxy = _proxy(step)
    return UndoItem(
        seq=step.sequence,
        step_id=str(step.id),
        tool=str(proxy.get("exposed_name") or proxy.get("tool", step.action)),
        server=str(proxy.get("server", "")),
        effect_class=str(proxy.get("class", "unknown")),
        verdict=verdict,
        detail=detail,
        inverse=_inverse(step),
    )


def _inverse(step: Step) -> dict[str, Any] | None:
    compensation = step.action_definition.get("compensation")
    if not isinstance(compensation, dict):
        return None
    try:
        arguments = render(compensation.get("arguments", {}), _scope(step), "compensation.arguments")
    except ActionFailure as missing:
        arguments = {"(cannot render)": missing.message}
    return {"tool": compensation.get("tool"), "arguments": arguments}


def _scope(step: Step) -> dict[str, Any]:
    stored = step.result if isinstance(step.result, dict) else {}
    return {"input": step.input, "result": stored.get("result"), "pre_state": stored.get("pre_state")}


def _proxy(step: Step) -> dict[str, Any]:
    section = step.action_definition.get("proxy", {})
    return section if isinstance(section, dict) else {}


# --- the drift check --------------------------------------------------------------------------------------------


def _drift(step: Step) -> str:
    """Why the current state is not what `step` left ("" when it is, or when there is no capture to compare)."""
    capture = step.action_definition.get("capture")
    stored = step.result if isinstance(step.result, dict) else {}
    pre_state = stored.get("pre_state")
    if not isinstance(capture, dict) or not isinstance(pre_state, dict):
        return ""
    expected = _left_by(stored.get("result"), pre_state)
    outcome = executor.perform(
        _read_definition(step.action_definition, capture), _read_context(step), compensation=False
    )
    if outcome.ok:
        current = (outcome.result or {}).get("result")
        if expected is None:
            return f"{capture['tool']} finds it again, though the call had removed it"
        changed = sorted(
            key for key, value in expected.items() if not isinstance(current, dict) or current.get(key) != value
        )
        return f"{', '.join(changed)} changed since the call (read with {capture['tool']})" if changed else ""
    error = outcome.error or {}
    if error.get("code") == "MCP_TOOL_ERROR":
        return "" if expected is None else f"{capture['tool']} no longer finds it, though the call had left it"
    return f"the current state could not be read with {capture['tool']} ({error.get('message', 'unknown error')})"


def _left_by(result: Any, pre_state: dict[str, Any]) -> dict[str, Any] | None:
    """What the call left of the captured fields: the result's values when it answers all of them (an update
    answers the thing as it is now), else None, meaning the thing is gone (a delete answers {"deleted": true})."""
    if isinstance(result, dict) and all(key in result for key in pre_state):
        return {key: result[key] for key in pre_state}
    return None


def _read_definition(snapshot: dict[str, Any], capture: dict[str, Any]) -> dict[str, Any]:
    """The step's own contract, with its capture read as the only call (so it reaches the same server)."""
    kept = {key: value for key, value in snapshot.items() if key not in ("proxy", "compensation", "capture")}
    return {**kept, "forward": {"tool": capture["tool"], "arguments": capture.get("arguments", {})}}


def _read_context(step: Step) -> InvocationContext:
    return InvocationContext(
        saga_id=str(step.saga_id), step_id=str(step.id), idempotency_key=f"{step.id}:drift", input=step.input
    )


def _refuse_drifted(actor: Principal, pk: uuid.UUID, step: Step, drift: str) -> None:
    with locked_saga(pk, actor) as tx:
        step.refresh_from_db()
        error = {
            "code": "STATE_DRIFTED",
            "message": f"The inverse was not run: {drift}. Someone changed it after this call; check it, then run "
            "the undo again with --force to apply the inverse anyway.",
            "retryable": False,
        }
        rollback._fail(tx, step, error)
