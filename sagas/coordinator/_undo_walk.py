"""The undo walk of a proxy session: what every rollback of a proxy session runs, whoever runs it.

`semantic-saga undo` (sagas.coordinator.proxy.undo) runs it first; the rollback runner (sagas.coordinator.rollback
`_run`) runs it for a proxy session too, so a walk resumed after its process died (the recovery sweep, a worker's
nudge), the sweeper's retry of a ROLLBACK_FAILED session and the saga's rollback operation (console, REST, MCP,
A2A) all unwind it the same way: R inverses run with `<step id>:rollback`, C and I calls, and R calls whose inverse
cannot be built from what they kept, are listed (UNDO_LISTED in the audit chain, once per call) instead of failing
the rollback, reads are skipped, the drift check runs, and the session is planned as a whole: a call a newer call of
the session built on, or one behind a refused inverse, is `left` (UNDO_LISTED with `behind`, the newer call's
sequence), never called drift (sagas.coordinator._undo_residue).

The options an undo was asked with (`force`, `to_checkpoint`) are recorded in the transaction that requests the
rollback (UNDO_REQUESTED), and every later walk of that rollback reads them back: a resumed walk refuses a drifted
inverse exactly as the first one would have, and undoes no more than the calls after the checkpoint. A session is
rolled back once (ROLLED_BACK is terminal), so the newest UNDO_REQUESTED always belongs to the rollback at hand; a
rollback started without one (the rollback operation) walks the whole session without force.
"""

from __future__ import annotations

import contextlib
import contextvars
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import Any

from django.utils import timezone

from audit.models import AuditEvent
from audit.models import EventType as E
from governance.identity.principal import UNATTENDED_CLI, Principal
from governance.identity.rbac import DECIDE, can
from sagas import executor
from sagas.coordinator._deciders import not_a_person
from sagas.coordinator._inverse_gates import gate_now
from sagas.coordinator._journal_digests import journal_refusal
from sagas.coordinator._tx import Tx, locked_saga
from sagas.coordinator._undo_drift import Drift, drift
from sagas.coordinator._undo_residue import Residue, Residues
from sagas.coordinator.compensation import compensate, fail, runner_lost
from sagas.errors import InvalidTransition
from sagas.models import Checkpoint, Saga, Step
from sagas.selectors.journal_digests import SessionDigests, verified_digests
from sagas.selectors.undo_plan import InverseGate, UndoItem, item, proxy_section, verdict_of
from sagas.states import SagaKind, SagaStatus, StepStatus

# Verdicts the walk records in the audit chain: what it leaves for a person, per call.
LISTED = frozenset({"needs_decision", "no_way_back", "cannot_undo", "inverse_blocked", "existed_before"})
# A call with an inverse that the walk leaves because a newer call of the session stands on it (_undo_residue).
LEFT = "left"


@dataclass(frozen=True)
class UndoOptions:
    """What the undo was asked: run drifted inverses anyway; walk only the calls after this checkpoint."""

    force: bool = False
    to_checkpoint: str = ""  # the label as asked (shown in the report)
    checkpoint_id: str = ""  # the checkpoint that label named when the undo was asked


def is_session(saga_id: uuid.UUID) -> bool:
    return Saga.objects.filter(pk=saga_id, kind=SagaKind.PROXY_SESSION).exists()


# Undo requests kept in the session's metadata (metadata.proxy.undo_requests): who asked, when, with which options
# and, for a forced undo asked in the console, why. The reason is an operator's text, so it stays out of the audit
# chain (payload-free: docs/audit_hash.md) as an approval's reason does; the chain records the options.
UNDO_REQUESTS = "undo_requests"


def recorder(options: UndoOptions, reason: str = "") -> Callable[[Tx], None]:
    """Records `options` (UNDO_REQUESTED) in the transaction that requests the rollback (rollback._request), and
    the request with its reason in the session's metadata."""

    def record(tx: Tx) -> None:
        saga = tx.saga
        live = saga.lease_expires_at is not None and saga.lease_expires_at > timezone.now()
        if saga.status == SagaStatus.ROLLING_BACK and live:
            raise InvalidTransition(
                "UNDO_BUSY",
                f"Session {saga.id} is being undone by another runner right now, so this undo did not start and "
                "nothing changed. Wait for it to finish (`semantic-saga status` shows the session), then look at "
                "the result with `semantic-saga undo --dry-run`.",
            )
        data = {"force": options.force, "to_checkpoint": options.to_checkpoint, "checkpoint_id": options.checkpoint_id}
        tx.record(E.UNDO_REQUESTED, status=saga.status, data=data)
        request = {**data, "by": tx.actor.principal_id, "at": timezone.now().isoformat(), "reason": reason}
        metadata = dict(saga.metadata or {})
        proxy = dict(metadata.get("proxy") or {})
        proxy[UNDO_REQUESTS] = [*proxy.get(UNDO_REQUESTS, []), request]
        tx.update(saga, metadata={**metadata, "proxy": proxy})

    return record


def recorded_options(saga_id: uuid.UUID) -> UndoOptions:
    """The options of the session's undo (the newest UNDO_REQUESTED), or the defaults when none was recorded."""
    requests = AuditEvent.objects.filter(saga_id=saga_id, event_type=E.UNDO_REQUESTED)
    event = requests.order_by("-sequence").only("data").first()
    data = event.data if event is not None and isinstance(event.data, dict) else {}
    return UndoOptions(
        force=bool(data.get("force", False)),
        to_checkpoint=str(data.get("to_checkpoint", "")),
        checkpoint_id=str(data.get("checkpoint_id", "")),
    )


def steps_newest_first(saga_id: uuid.UUID, options: UndoOptions) -> list[Step]:
    # Every step, not only the proxied calls: a registered action run in the session (execute_saga_step) is
    # unwound by the same walk, by its declared compensation, or listed when it has none.
    steps = Step.objects.filter(saga_id=saga_id).order_by("-sequence")
    if options.checkpoint_id:
        checkpoint = Checkpoint.objects.filter(pk=options.checkpoint_id, saga_id=saga_id).first()
        if checkpoint is None:  # checkpoints are never deleted; refuse rather than undo more than was asked
            raise InvalidTransition(
                "CHECKPOINT_NOT_FOUND",
                f"The undo of session {saga_id} was asked to stop at checkpoint {options.to_checkpoint!r}, which no "
                "longer exists, so nothing more was undone. Run `semantic-saga undo` again with the checkpoint to "
                "undo to.",
            )
        steps = steps.filter(created_at__gt=checkpoint.created_at)
    return list(steps)


@dataclass(frozen=True)
class UndoWatch:
    """Who watches an undo walk run in this thread (the `undo` command on a terminal): `progress(done, total, item)`
    hears of each call as it is decided; `stop()` true ends the walk between two calls (never mid-call), leaving
    the session ROLLING_BACK to be resumed by the next undo."""

    progress: Callable[[int, int, UndoItem], None] | None = None
    stop: Callable[[], bool] | None = None


_WATCH: contextvars.ContextVar[UndoWatch | None] = contextvars.ContextVar("undo_watch", default=None)


@contextlib.contextmanager
def watching(watch: UndoWatch) -> Iterator[None]:
    token = _WATCH.set(watch)
    try:
        yield
    finally:
        _WATCH.reset(token)


def stop_asked() -> bool:
    watch = _WATCH.get()
    return watch is not None and watch.stop is not None and watch.stop()


def walk(actor: Principal, saga_id: uuid.UUID, fence: int, options: UndoOptions) -> list[UndoItem]:
    """Walk the session newest-first under the runner's `fence`, planning it as a whole (sagas.coordinator.
    _undo_residue): a refused or failed inverse leaves the older calls that touch the same thing, nothing else."""
    watch = _WATCH.get() or UndoWatch()
    steps = steps_newest_first(saga_id, options)
    items: list[UndoItem] = []
    residues = Residues()
    digests = verified_digests(saga_id)  # what each row must still match (issue 39)
    with executor.shared_connections():  # one connection per downstream server for the whole walk
        for step in steps:
            if stop_asked():
                break
            entry = _walk_one(actor, saga_id, fence, options, step, residues, digests)
            if entry is None:
                break  # this runner lost its lease: the one that took over walks on
            items.append(entry)
            if watch.progress is not None:
                watch.progress(len(items), len(steps), entry)
    return items


def _walk_one(
    actor: Principal,
    saga_id: uuid.UUID,
    fence: int,
    options: UndoOptions,
    step: Step,
    residues: Residues,
    digests: SessionDigests,
) -> UndoItem | None:
    """What the walk does with one call (None: the runner lost its lease)."""
    if untrusted := journal_refusal(step, digests):  # an edited row is refused before anything reads it, force or not
        _refuse(actor, saga_id, fence, step, untrusted.error)
        residues.add(step, refused=True)
        return untrusted.item
    verdict, detail = verdict_of(step)
    if verdict in LISTED:
        _list(actor, saga_id, fence, step, verdict)
        residues.add(step, refused=False)
        return item(step, verdict, detail)
    if verdict != "would_undo":
        return item(step, verdict, detail)
    if blocker := residues.blocker(step):
        residues.add(step, refused=True)
        _list(actor, saga_id, fence, step, LEFT, behind=blocker.seq, why="behind_refused")
        return item(step, LEFT, behind_refused(blocker))
    if (gate := gate_now(step)) is not None and (governed := _governed(actor, saga_id, fence, step, gate)):
        residues.add(step, refused=governed.verdict == "needs_person")
        return governed
    if not options.force and (drifted := drift(step)):
        built_on = None if drifted.unreadable else residues.built_on(step)
        if built_on is not None:
            residues.add(step, refused=False)
            _list(actor, saga_id, fence, step, LEFT, behind=built_on.seq)
            return item(step, LEFT, built_on_by(built_on))
        _refuse(actor, saga_id, fence, step, _refusal(drifted))
        residues.add(step, refused=True)
        return _refused_item(step, drifted)
    if not compensate(actor, saga_id, step.id, fence):
        return None
    step.refresh_from_db()
    if step.status == StepStatus.COMPENSATED:
        return _outcome(step)
    residues.add(step, refused=True)
    failed = _outcome(step)
    if built_on := residues.built_on(step):  # the session's own later call may be why (it took the old name)
        return replace(
            failed,
            detail=f"{failed.detail}; {built_on.label} of this session, which has no way back, "
            "touches the same thing and may be why",
        )
    return failed


def _governed(actor: Principal, saga_id: uuid.UUID, fence: int, step: Step, gate: InverseGate) -> UndoItem | None:
    """What the inverse's gate (as it stands now: sagas.coordinator._inverse_gates) makes of the call, or None when
    the inverse may be sent: a blocked inverse is never sent (the call is left, listed); one gated `confirm` is sent
    only when the undo is a person's, which is their confirmation (an agent's own undo, the coordinator's retry and
    a command run with no terminal leave it waiting for one)."""
    if gate.action in ("block", "hide"):
        _list(actor, saga_id, fence, step, "inverse_blocked")
        detail = f"its inverse {gate.tool} is gated {gate.action} ({gate.reason}), so the undo never sends it"
        return item(step, "inverse_blocked", f"{detail}: a person corrects it outside the proxy")
    if gate.action != "confirm" or a_person(actor):
        return None
    whose = "ran with no terminal" if actor.protocol == UNATTENDED_CLI else f"is {actor.principal_id}'s, not a person's"
    message = (
        f"The inverse {gate.tool} was not sent: its gate is confirm ({gate.reason}), and this undo {whose}. A person "
        "runs it: `semantic-saga undo` at a terminal, or Undo in the console (an operator of the session's tenant)."
    )
    _refuse(actor, saga_id, fence, step, {"code": "INVERSE_NEEDS_A_PERSON", "message": message, "retryable": False})
    return item(step, "needs_person", message)


def a_person(actor: Principal) -> bool:
    """A person who may decide (the `decide` capability, signed in, through a surface agents do not drive); never
    the coordinator's own principal, nor a command run with no terminal."""
    unattended = actor.principal_type == "system" or actor.protocol == UNATTENDED_CLI
    return not unattended and can(actor, DECIDE) and not_a_person(actor, "undo") is None


def built_on_by(residue: Residue) -> str:
    return (
        f"left, because {residue.label} of this session built on it and has no way back: undoing this one alone "
        "would not put the world back"
    )


def behind_refused(residue: Residue) -> str:
    return (
        f"left: {residue.label} touches the same thing and could not be undone; deal with it, then run the undo again"
    )


def _outcome(step: Step) -> UndoItem:
    if step.status == StepStatus.COMPENSATED:
        return item(step, "undone", "its inverse ran")
    error = step.compensation_error or {}
    return item(step, "failed", f"its inverse failed: {error.get('message', step.status)}")


def _list(
    actor: Principal, saga_id: uuid.UUID, fence: int, step: Step, verdict: str, behind: int = 0, why: str = "built_on"
) -> None:
    """UNDO_LISTED for a call the undo leaves for a person; once per call, so a resumed walk does not repeat it.
    `behind`: the newer call of the session it was left behind (verdict `left`)."""
    with locked_saga(saga_id, actor) as tx:
        if runner_lost(tx, fence, step):
            return
        listed = AuditEvent.objects.filter(saga_id=saga_id, event_type=E.UNDO_LISTED, step_id=str(step.id))
        if not listed.exists():
            data: dict[str, Any] = {"verdict": verdict, "class": str(proxy_section(step).get("class", "unknown"))}
            if behind:
                data.update(behind=behind, why=why)
            tx.record(E.UNDO_LISTED, step=step, status=step.status, data=data)


def _refuse(actor: Principal, saga_id: uuid.UUID, fence: int, step: Step, error: dict[str, Any]) -> None:
    """Fail the step's compensation with `error` without sending its inverse."""
    with locked_saga(saga_id, actor) as tx:
        step.refresh_from_db()
        if runner_lost(tx, fence, step):
            return
        fail(tx, step, error)


def _refusal(drifted: Drift) -> dict[str, Any]:
    if drifted.unreadable:
        return {
            "code": "STATE_UNREADABLE",
            "message": f"The inverse was not run: {drifted.reason}. Nothing was sent. Make the server reachable "
            "from where the undo runs, then run the undo again.",
            "retryable": True,
        }
    return {
        "code": "STATE_DRIFTED",
        "message": f"The inverse was not run: {drifted.reason}. Someone changed it after this call; check it, then "
        "run the undo again with --force to apply the inverse anyway.",
        "retryable": False,
    }


def _refused_item(step: Step, drifted: Drift) -> UndoItem:
    if drifted.unreadable:
        return item(step, "failed", f"inverse not sent: {drifted.reason}; make the server reachable and undo again")
    return item(step, "drifted", f"inverse refused: {drifted.reason}; undo --force runs it anyway")
