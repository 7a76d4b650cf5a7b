"""Undo of a proxy session (`semantic-saga undo`): walk its proxied calls newest-first and put the world back.

    R (a declared inverse in the step's snapshot)  -> the inverse runs as a journaled compensation, with the
                                                      step's rollback idempotency key `<step id>:rollback`
    C                                              -> listed: only an operator can decide on a correction
    I, unknown, an R without an inverse            -> listed: no way back
    reads, refused, dry and failed-not-sent calls  -> skipped: nothing in the world to undo

Where the call's inverse has a capture, the state is read again first and compared with what the step left
(sagas.coordinator._undo_drift): a difference refuses that inverse (STATE_DRIFTED) unless `force`. The first
inverse refused or failed stops the walk; the session ends ROLLBACK_FAILED with the failure, and what is left is
listed. Run it again to retry from there.

The undo is the coordinator's rollback (sagas.coordinator.rollback) with the walk of sagas.coordinator._undo_walk:
the request records the options (UNDO_REQUESTED) as the session becomes FAILED, then ROLLING_BACK under the
runner's fenced lease; each inverse is claimed, called and recorded by the functions a saga rollback uses, each C
and I call is listed in the audit chain (UNDO_LISTED), and the session ends ROLLED_BACK or ROLLBACK_FAILED. If the
process dies mid-walk, the recovery sweep resumes the same walk with the recorded options, re-sending an inverse
that was in flight with its same key. With `to_checkpoint` only the calls made after that checkpoint are walked.
A dry run decides and reads (the drift check) but changes and records nothing.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from governance.identity.principal import Principal
from governance.identity.rbac import EXECUTE, authorize
from sagas.coordinator import rollback
from sagas.coordinator._leases import LeaseRef, heartbeat
from sagas.coordinator._undo_drift import drift, reach
from sagas.coordinator._undo_walk import UndoOptions, recorder, steps_newest_first, walk
from sagas.errors import InvalidInput, InvalidTransition
from sagas.models import Saga, Step
from sagas.selectors.proxy_ledger import held_nodes, held_row, session_checkpoint
from sagas.selectors.scope import tenant_saga
from sagas.selectors.undo_plan import MAX_UNDO_REASON_CHARS, UndoItem, item, verdict_of

__all__ = ["UndoItem", "UndoReport", "proxy_session_undo"]


@dataclass(frozen=True)
class UndoReport:
    saga_id: str
    status: str  # the session's status afterwards (unchanged by a dry run)
    dry_run: bool
    checkpoint: str
    items: tuple[UndoItem, ...]

    def as_json(self) -> dict[str, Any]:
        return {**asdict(self), "items": [asdict(entry) for entry in self.items]}


def proxy_session_undo(
    *,
    actor: Principal,
    saga_id: object,
    to_checkpoint: str = "",
    dry_run: bool = False,
    force: bool = False,
    reason: str = "",
) -> UndoReport:
    """Undo the session's calls (after `to_checkpoint`, when given), newest-first, as the module docstring says.

    Effects: audit UNDO_REQUESTED {force, to_checkpoint, checkpoint_id} with the rollback request, then the
    rollback's events, UNDO_LISTED per C or I call; the request, with `reason`, kept in the session's
    metadata.proxy.undo_requests (never in the chain). Errors: NOT_A_PROXY_SESSION, CHECKPOINT_NOT_FOUND,
    ROLLBACK_REFUSED (committed or already rolled back), UNDO_BUSY (a call is still in flight, or another walk runs),
    INVALID_INPUT (a reason longer than MAX_UNDO_REASON_CHARS).
    """
    authorize(actor, EXECUTE, "rollback")
    if len(reason) > MAX_UNDO_REASON_CHARS:
        raise InvalidInput(
            message=f"The undo's reason is {len(reason)} characters; keep it to {MAX_UNDO_REASON_CHARS} (say why, and "
            "put the rest in your ticket). Nothing was undone."
        )
    saga = tenant_saga(actor, saga_id)
    if not saga.is_proxy_session:
        raise InvalidInput("NOT_A_PROXY_SESSION", f"Saga {saga.id} is not a proxy session; nothing was undone.")
    checkpoint = session_checkpoint(actor=actor, saga=saga, label=to_checkpoint) if to_checkpoint else None
    options = UndoOptions(force, to_checkpoint, str(checkpoint.id) if checkpoint else "")
    held = _held_items(saga)  # newest of all: not yet journaled; the undo withdraws them (rollback closes them)
    if dry_run:
        items = held + _dry_walk(steps_newest_first(saga.id, options), force)
        return UndoReport(str(saga.id), saga.status, True, to_checkpoint, items)
    if rollback.in_flight(saga):
        raise InvalidTransition(
            "UNDO_BUSY",
            f"Session {saga.id} has a call in flight, so nothing was undone and nothing changed. Run the undo "
            "again once the call has finished (`semantic-saga ledger` shows it as executing until then).",
        )
    pk = rollback._request(actor, saga.id, note=recorder(options, reason.strip()))
    fence = rollback._start(actor, pk)
    if fence is None:
        raise InvalidTransition(
            "UNDO_BUSY",
            f"Session {saga.id} has a call in flight or another rollback running, so the undo did not start now. The "
            "session is FAILED, waiting to be rolled back: the recovery sweep runs this undo (with these options) "
            "once the call has finished, or run the undo again then.",
        )
    with heartbeat(LeaseRef(Saga, pk, fence)):
        items = tuple(walk(actor, pk, fence, options))
        finished = rollback._finish(actor, pk, fence)
    return UndoReport(str(saga.id), finished.status, False, to_checkpoint, held + items)


def _held_items(saga: Saga) -> tuple[UndoItem, ...]:
    """The session's held calls (waiting for a decision, or approved and not yet sent): never sent, so there is
    nothing to undo, but the undo ends them: the rollback closes their approvals, and the agent waiting on each is
    told the session was undone."""
    rows = [held_row(node) for node in held_nodes(saga)]
    detail = "held, never sent: the undo withdraws it and closes its approval"
    return tuple(
        UndoItem(0, row.id, row.tool, row.server, row.effect_class, "withdrawn", detail) for row in reversed(rows)
    )


def _dry_walk(steps: list[Step], force: bool) -> tuple[UndoItem, ...]:
    """The plan, newest first. A call's state is read now, but the walk reads it only after undoing the newer calls,
    which may put back exactly what it left (the same file written twice): a difference there is not yet a drift
    when a newer inverse may touch the same thing (it reads one of the same values, or its reach is unknown)."""
    items: list[UndoItem] = []
    reaches: list[frozenset[str] | None] = []  # what each newer call's inverse may touch (None: unknown)
    for step in steps:
        mine = reach(step)
        touched = any(other is None or mine is None or other & mine for other in reaches)
        items.append(_dry(step, force, after_newer=touched))
        if items[-1].verdict == "would_undo":
            reaches.append(mine)
    return tuple(items)


def _dry(step: Step, force: bool, *, after_newer: bool) -> UndoItem:
    verdict, detail = verdict_of(step)
    if verdict == "would_undo" and not force and (drifted := drift(step)):
        if drifted.unreadable:
            return item(step, "failed", f"its inverse would not be sent: {drifted.reason}; make the server reachable")
        if after_newer:
            return item(
                step,
                "would_undo",
                f"its inverse would run if undoing the newer calls puts back what it left: now {drifted.reason}, "
                "and a difference still there then stops the undo at this call",
            )
        return item(step, "drifted", f"its inverse would be refused: {drifted.reason}; undo --force would run it")
    return item(step, verdict, detail)
