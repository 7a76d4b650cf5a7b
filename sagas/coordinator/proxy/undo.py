"""Undo of a proxy session (`semantic-saga undo`): walk its proxied calls newest-first and put the world back.

    R (a declared inverse in the step's snapshot)  -> the inverse runs as a journaled compensation, with the
                                                      step's rollback idempotency key `<step id>:rollback`
    C                                              -> listed: only an operator can decide on a correction
    I, unknown, an R without an inverse            -> listed: no way back
    reads, refused, dry and failed-not-sent calls  -> skipped: nothing in the world to undo

Where the call's inverse has a capture, the state is read again first and compared with what the step left
(sagas.coordinator._undo_drift), and the session is planned as a whole (sagas.coordinator._undo_residue): a
difference that a newer call of the session with no way back explains leaves the call (`left`), one made outside
the session refuses that inverse (STATE_DRIFTED) unless `force`, and a refused or failed inverse leaves the older
calls that touch the same thing. The session then ends ROLLBACK_FAILED; run it again to retry from there. How the
undo ended (undone, calls left, stopped, interrupted) is the report's `outcome` (sagas.selectors.undo_outcome).
Asked to stop between two calls (UndoWatch), the walk lets go of its lease and the session stays ROLLING_BACK.

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
from sagas import executor
from sagas.coordinator import rollback
from sagas.coordinator._journal_digests import EDITED, UNVERIFIED, journal_refusal
from sagas.coordinator._leases import LeaseRef, heartbeat
from sagas.coordinator._undo_drift import drift
from sagas.coordinator._undo_residue import Residues
from sagas.coordinator._undo_walk import (
    LEFT,
    LISTED,
    UndoOptions,
    behind_refused,
    built_on_by,
    recorder,
    steps_newest_first,
    stop_asked,
    walk,
)
from sagas.errors import InvalidInput, InvalidTransition
from sagas.models import Saga, Step
from sagas.selectors.journal_digests import SessionDigests, verified_digests
from sagas.selectors.proxy_ledger import held_nodes, held_row, session_checkpoint
from sagas.selectors.proxy_text import DEPENDS
from sagas.selectors.scope import tenant_saga
from sagas.selectors.undo_outcome import undo_outcome
from sagas.selectors.undo_plan import MAX_UNDO_REASON_CHARS, UndoItem, item, verdict_of
from sagas.states import SagaStatus

__all__ = ["UndoItem", "UndoReport", "proxy_session_undo"]


@dataclass(frozen=True)
class UndoReport:
    saga_id: str
    status: str  # the session's status afterwards (unchanged by a dry run)
    dry_run: bool
    checkpoint: str
    items: tuple[UndoItem, ...]
    # How the session's undo ended, as every surface shows it (sagas.selectors.undo_outcome); None for a dry run.
    outcome: dict[str, Any] | None = None

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
        items = held + _dry_walk(steps_newest_first(saga.id, options), force, verified_digests(saga.id))
        return UndoReport(str(saga.id), saga.status, True, to_checkpoint, items)
    if saga.status == SagaStatus.ROLLED_BACK:
        outcome = undo_outcome(saga)
        raise InvalidTransition(
            "ALREADY_UNDONE",
            f"Session {saga.id} was already undone ({outcome.summary if outcome else 'undone'}); a session is undone "
            "once, so nothing changed. `semantic-saga undo --dry-run` shows what became of each call; a call left "
            "in the world is for a person to correct.",
        )
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
        stopped = stop_asked()
        finished = None if stopped else rollback._finish(actor, pk, fence)
    if finished is None:
        # Stopped part-way (the command was interrupted): the session stays ROLLING_BACK with its runner's lease let
        # go (once the heartbeat has stopped), so the next undo resumes at once where this one stopped; no inverse
        # that ran is sent again.
        finished = rollback._pause(actor, pk, fence)
    return UndoReport(str(saga.id), finished.status, False, to_checkpoint, held + items, _outcome_of(finished))


def _outcome_of(saga: Saga) -> dict[str, Any] | None:
    outcome = undo_outcome(saga)
    return outcome.as_json() if outcome is not None else None


def _held_items(saga: Saga) -> tuple[UndoItem, ...]:
    """The session's held calls (waiting for a decision, or approved and not yet sent): never sent, so there is
    nothing to undo, but the undo ends them: the rollback closes their approvals, and the agent waiting on each is
    told the session was undone."""
    rows = [held_row(node) for node in held_nodes(saga)]
    detail = "held, never sent: the undo withdraws it and closes its approval"
    return tuple(
        UndoItem(0, row.id, row.tool, row.server, row.effect_class, "withdrawn", detail) for row in reversed(rows)
    )


def _dry_walk(steps: list[Step], force: bool, digests: SessionDigests) -> tuple[UndoItem, ...]:
    """The plan, newest first, by the walk's rules (sagas.coordinator._undo_residue). A call's state is read now,
    but the walk reads it only after undoing the newer calls, which may put back exactly what it left (the same file
    written twice): a difference there is not yet a drift when a newer inverse may touch the same thing."""
    items: list[UndoItem] = []
    residues = Residues()  # newer calls that would stay in the world
    undoing = Residues()  # newer calls whose inverse would run
    with executor.shared_connections():  # one connection per downstream server for the drift reads
        for step in steps:
            entry = _dry(step, force, residues, undoing, digests)
            items.append(entry)
            if entry.verdict in LISTED or entry.verdict == LEFT:
                residues.add(step, refused=False)
            elif entry.verdict in ("drifted", "failed", EDITED, UNVERIFIED):
                residues.add(step, refused=True)
            elif entry.verdict == "would_undo":
                undoing.add(step, refused=False)
    return tuple(items)


def _dry(step: Step, force: bool, residues: Residues, undoing: Residues, digests: SessionDigests) -> UndoItem:
    if untrusted := journal_refusal(step, digests):  # refused whatever --force says, as the walk refuses it
        return untrusted.item
    verdict, detail = verdict_of(step)
    if verdict != "would_undo":
        return item(step, verdict, detail)
    if blocker := residues.blocker(step):
        return item(step, LEFT, behind_refused(blocker))
    if force or not (drifted := drift(step)):
        return item(step, verdict, detail)
    if drifted.unreadable:
        return item(step, "failed", f"its inverse would not be sent: {drifted.reason}; make the server reachable")
    built_on = residues.built_on(step)
    if undoing.built_on(step):  # the walk reads it only after the newer inverses ran: they may put it back
        then = f"left, as {built_on.label} of this session built on it" if built_on else "refuses this call"
        return item(
            step,
            "would_undo",
            f"its inverse would run {DEPENDS}: now {drifted.reason}, and a difference still there then {then}",
        )
    if built_on is not None:
        return item(step, LEFT, built_on_by(built_on))
    return item(step, "drifted", f"its inverse would be refused: {drifted.reason}; undo --force would run it")
