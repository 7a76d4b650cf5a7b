"""How a proxy session's undo ended, in one sentence every surface shows the same way.

A session whose undo put everything back is `undone`. One whose undo finished but left calls in the world (an email
that cannot be unsent, a commit the server cannot take back, a call a later call of the session built on) is not
reported as fully undone: it is `undone_with_calls_left`, and the sentence names each call left and why:

    undone, 3 calls left: send_email (needs a decision), post_tweet (needs a decision), transfer_funds (no way back)

The saga's status stays ROLLED_BACK in both cases (the seed's meaning, for sagas and sessions alike: the rollback
ran to its end and nothing more will run); the residue is what tells them apart. `undo_stopped` is a session whose
undo refused or failed an inverse (ROLLBACK_FAILED: run undo again once it is dealt with), `undo_interrupted` one
whose undo was stopped part-way (ROLLING_BACK with no runner: run undo again; it resumes where it stopped), and
`undoing` one whose undo runs right now. Read from the journal only: the steps' states and the UNDO_LISTED events
the walk recorded, never from the downstream servers.

A plain saga (not a session) has no residue: its steps are compensated by their declared compensations, a C step's
correction included, and ROLLED_BACK means exactly what it meant in semantic-saga-mcp.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

from django.db.models import Q, QuerySet, Subquery
from django.db.models.functions import Now
from django.utils import timezone

from audit.models import AuditEvent
from audit.models import EventType as E
from sagas.models import Saga, Step
from sagas.states import SagaKind, SagaStatus, StepStatus

# What a person reads for a call the undo left, by its verdict.
LEFT_WORDS: dict[str, str] = {
    "needs_decision": "needs a decision",
    "no_way_back": "no way back",
    "cannot_undo": "cannot be undone",
    "inverse_blocked": "its inverse is blocked by a gate",
    "existed_before": "what it names existed before",
    "needs_person": "its inverse waits for a person to undo",
    "left": "built on by a later call",
    "drifted": "changed outside the session",
    "failed": "its inverse failed",
    "unreadable": "its state could not be read",
    # Its journal row no longer matches the digests the audit chain holds, or the chain does not verify (issue 39).
    "edited": "its journal row was edited",
    "unverified": "its session's audit chain does not verify",
}
# Verdicts of calls whose undo was refused or failed: the undo stopped on them.
STUCK = frozenset({"drifted", "failed", "unreadable", "needs_person", "edited", "unverified"})
# A compensation refused without being sent, by its code: the verdict a person reads.
REFUSAL_VERDICTS = {
    "STATE_DRIFTED": "drifted",
    "STATE_UNREADABLE": "unreadable",
    "INVERSE_NEEDS_A_PERSON": "needs_person",
    "JOURNAL_ROW_EDITED": "edited",
    "JOURNAL_CHAIN_BROKEN": "unverified",
}
UNDO_STATES = ("undone", "undone_with_calls_left", "undo_stopped", "undo_interrupted", "undoing")
# A session's state in a table cell, once it was undone.
UNDO_STATE_WORDS: dict[str, str] = {
    "undone": "undone",
    "undone_with_calls_left": "undone, calls left",
    "undo_stopped": "undo stopped",
    "undo_interrupted": "undo interrupted",
    "undoing": "undoing",
}
UNDO_STATE_BADGES: dict[str, str] = {
    "undone": "ROLLED_BACK",
    "undone_with_calls_left": "WAITING_APPROVAL",
    "undo_stopped": "ROLLBACK_FAILED",
    "undo_interrupted": "ROLLBACK_FAILED",
    "undoing": "ROLLING_BACK",
}
# Where a state needs a person: the sessions `semantic-saga status` counts as waiting for an operator.
NEEDS_AN_OPERATOR = frozenset({"undone_with_calls_left", "undo_stopped", "undo_interrupted"})
_UNDOING = frozenset({SagaStatus.ROLLING_BACK, SagaStatus.FAILED})


@dataclass(frozen=True)
class LeftCall:
    seq: int
    tool: str
    verdict: str
    words: str


@dataclass(frozen=True)
class UndoOutcome:
    state: str  # one of UNDO_STATES
    summary: str  # the sentence: "undone, 2 calls left: ..." / "undo interrupted: 3 of 7 done; run undo again"
    done: int  # calls whose inverse ran
    total: int  # calls with an inverse to run (done included)
    left: tuple[LeftCall, ...] = field(default_factory=tuple)

    @property
    def sentence(self) -> str:
        """The summary as a report's last line: "the session is undone, ..." or "undo stopped: ..."."""
        return f"the session is {self.summary}" if self.state.startswith("undone") else self.summary

    @property
    def words(self) -> str:
        """The state in a table cell: "undone", "undone, calls left", "undo interrupted", ..."""
        return UNDO_STATE_WORDS[self.state]

    @property
    def badge(self) -> str:
        """The console's badge style for the state (a saga state's colours)."""
        return UNDO_STATE_BADGES[self.state]

    @property
    def needs_operator(self) -> bool:
        return self.state in NEEDS_AN_OPERATOR

    def as_json(self) -> dict[str, Any]:
        return {**asdict(self), "left": [asdict(call) for call in self.left], "needs_operator": self.needs_operator}


def undo_outcome(saga: Saga) -> UndoOutcome | None:
    """How the session's undo ended (or stands), or None: not a session, or never undone."""
    return undo_outcomes([saga]).get(saga.id)


def undo_outcomes(sagas: Iterable[Saga]) -> dict[Any, UndoOutcome]:
    """undo_outcome for each of `sagas`, in three queries."""
    undone = [saga for saga in sagas if saga.kind == SagaKind.PROXY_SESSION and _undo_touched(saga)]
    if not undone:
        return {}
    ids = [saga.id for saga in undone]
    events = AuditEvent.objects.filter(saga_id__in=ids, event_type__in=(E.UNDO_REQUESTED, E.UNDO_LISTED))
    asked: dict[str, dict[str, Any]] = {}  # saga id -> the newest undo request's options
    listed: dict[str, dict[str, Any]] = {}
    for saga_id, event_type, step_id, data in events.order_by("sequence").values_list(
        "saga_id", "event_type", "step_id", "data"
    ):
        if event_type == E.UNDO_REQUESTED:
            asked[str(saga_id)] = data if isinstance(data, dict) else {}
        else:
            listed[str(step_id)] = data if isinstance(data, dict) else {}
    steps: dict[Any, list[Step]] = {}
    for step in Step.objects.filter(saga_id__in=ids).order_by("-sequence"):
        steps.setdefault(step.saga_id, []).append(step)
    return {
        saga.id: _outcome(saga, steps.get(saga.id, []), listed, asked.get(str(saga.id), {}))
        for saga in undone
        if saga.status != SagaStatus.FAILED or str(saga.id) in asked  # FAILED without an undo asked: not one yet
    }


def _undo_touched(saga: Saga) -> bool:
    return saga.status in (SagaStatus.ROLLED_BACK, SagaStatus.ROLLBACK_FAILED, *_UNDOING)


def _outcome(saga: Saga, steps: list[Step], listed: dict[str, dict[str, Any]], asked: dict[str, Any]) -> UndoOutcome:
    done = sum(1 for step in steps if step.status == StepStatus.COMPENSATED)
    left = tuple(call for step in reversed(steps) if (call := _left(step, listed)) is not None)  # in call order
    pending = sum(1 for step in steps if _still_to_undo(step, listed))
    total = done + pending
    if saga.status == SagaStatus.ROLLED_BACK:
        # Undone to a checkpoint: the calls before it were not walked, as asked, and stay in the world.
        kept = f"; {_calls_before(pending, asked)}" if pending else ""
        if not left:
            undone = f": {done} of {done} calls undone" if done else ""
            return UndoOutcome("undone", f"undone{undone}{kept}", done, done)
        summary = f"undone, {_calls(left)} left: {_named(left)}{kept}"
        return UndoOutcome("undone_with_calls_left", summary, done, total, left)
    if saga.status == SagaStatus.ROLLBACK_FAILED:
        stuck = tuple(call for call in left if call.verdict in STUCK)
        summary = f"undo stopped: {_calls(stuck)} could not be undone ({_named(stuck)}); {done} of {total} done"
        rest = tuple(call for call in left if call not in stuck)
        summary += f"; also left: {_named(rest)}" if rest else ""
        return UndoOutcome("undo_stopped", summary + "; deal with them, then run undo again", done, total, left)
    live = saga.lease_expires_at is not None and saga.lease_expires_at > timezone.now()
    if live:
        return UndoOutcome("undoing", f"undoing: {done} of {total} done", done, total, left)
    return UndoOutcome(
        "undo_interrupted", f"undo interrupted: {done} of {total} done; run undo again", done, total, left
    )


def _left(step: Step, listed: dict[str, dict[str, Any]]) -> LeftCall | None:
    if step.status == StepStatus.COMPENSATED:
        return None
    if step.status == StepStatus.COMPENSATION_FAILED:
        code = (step.compensation_error or {}).get("code")
        verdict = REFUSAL_VERDICTS.get(str(code), "failed")
    elif str(step.id) in listed:
        verdict = str(listed[str(step.id)].get("verdict", "needs_decision"))
    else:
        return None
    # undo_plan, and the registry's contracts behind it, only for a session an undo ran on: `semantic-saga status`
    # reads many sessions' outcomes, most of them never undone.
    from sagas.selectors.undo_plan import proxy_section

    proxy = proxy_section(step)
    tool = str(proxy.get("exposed_name") or proxy.get("tool", step.action))
    words = left_words(listed.get(str(step.id), {})) if verdict == "left" else LEFT_WORDS.get(verdict, verdict)
    return LeftCall(step.sequence, tool, verdict, words.replace("_", " "))


def left_words(listed: dict[str, Any]) -> str:
    """Why the undo left a call that has an inverse, from its UNDO_LISTED data (`behind`: the newer call)."""
    behind = listed.get("behind")
    if not behind:
        return LEFT_WORDS["left"]
    if listed.get("why") == "behind_refused":
        return f"call {behind} of the session could not be undone"
    return f"call {behind} of the session built on it"


def _still_to_undo(step: Step, listed: dict[str, dict[str, Any]]) -> bool:
    """A call the undo has yet to put back (or could not): in flight, failed, or not reached yet."""
    from sagas.selectors.undo_plan import verdict_of  # as in _left

    if step.status in (StepStatus.COMPENSATING, StepStatus.COMPENSATION_FAILED):
        return True
    return str(step.id) not in listed and step.status != StepStatus.COMPENSATED and verdict_of(step)[0] == "would_undo"


def _calls_before(pending: int, asked: dict[str, Any]) -> str:
    where = f"checkpoint {asked['to_checkpoint']!r}" if asked.get("to_checkpoint") else "the checkpoint"
    return f"{pending} call{'s' if pending != 1 else ''} before {where} stay, as asked (a session is undone once)"


def _calls(left: tuple[LeftCall, ...]) -> str:
    return f"{len(left)} call{'s' if len(left) != 1 else ''}"


def _named(left: tuple[LeftCall, ...]) -> str:
    return ", ".join(f"{call.tool} ({call.words})" for call in left)


@dataclass(frozen=True)
class Attention:
    """Sessions of the tenant, shown or not, that an operator must look at: undos stopped or interrupted (and
    sessions waiting for recovery), and sessions undone with calls left in the world."""

    stuck: tuple[str, ...]
    with_calls_left: tuple[str, ...]


def attention(sessions: QuerySet[Saga]) -> Attention:
    """Over all of `sessions` (the tenant's proxy sessions), in three queries, whatever a listing's limit shows."""
    stuck_states = (SagaStatus.ROLLBACK_FAILED, SagaStatus.RECOVERY_REQUIRED)
    stuck = sessions.filter(
        Q(status__in=stuck_states) | Q(status=SagaStatus.ROLLING_BACK) & ~Q(lease_expires_at__gt=Now())
    )
    undone = sessions.filter(status=SagaStatus.ROLLED_BACK).values("id")
    events = AuditEvent.objects.filter(event_type=E.UNDO_LISTED, saga_id__in=Subquery(undone))
    listed = [step_id for step_id in events.values_list("step_id", flat=True) if step_id]  # text, not a uuid column
    left = (
        Step.objects.filter(saga_id__in=Subquery(undone), id__in=listed)
        .exclude(status=StepStatus.COMPENSATED)
        .values_list("saga_id", flat=True)
        .distinct()
    )
    return Attention(tuple(str(pk) for pk in stuck.values_list("id", flat=True)), tuple(str(pk) for pk in left))
