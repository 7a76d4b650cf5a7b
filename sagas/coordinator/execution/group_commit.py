"""Group commit of node outcomes: attempts of one saga that finish at the same moment in this process share one
transaction instead of queueing one by one on the saga lock.

Every outcome of a saga is recorded under its row lock, so sixteen fan-out leaves finishing together would take
sixteen turns at that lock, each with its own round trips and COMMIT. Here the first thread to arrive records
(it leads); threads arriving while it does wait, and the next of them then records everything that gathered
meanwhile in one transaction (`_attempts.record_outcomes`): each outcome under its own fence, then each thread's
follow-up (its chained claim, its fan-out claims), exactly as if recorded one after the other. Nobody waits on
purpose: a thread that finds nobody recording records at once, so a lone chain pays nothing for this.

If a shared transaction fails, each of its attempts is recorded again on its own, so one attempt's error (a stale
fence, a broken contract) reaches only its own thread, as it would without grouping. A lost database connection is
retried by the record itself (sagas.coordinator.execution.record_retry); if it gives up, every attempt of the batch gets
that error, since recording them one by one would only retry it again.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

from sagas import executor
from sagas.coordinator.execution.attempts import Claim, FollowUp, Recording, record_outcome, record_outcomes
from sagas.coordinator.execution.record_retry import ConnectionLost

logger = logging.getLogger("sagas.coordinator")

Answer = tuple[str, "Claim | None"]


@dataclass
class _Attempt:
    claim: Claim
    outcome: executor.Outcome
    follow_up: FollowUp | None
    rolled_back: Callable[[], None]  # undoes what the follow-up kept outside the database (reserved threads)
    done: threading.Event = field(default_factory=threading.Event)
    leads: bool = False  # woken to record what gathered, not with an answer
    answer: Answer | None = None
    error: BaseException | None = None

    def settle(self, answer: Answer | None, error: BaseException | None) -> None:
        self.answer, self.error = answer, error
        self.done.set()

    def result(self) -> Answer:
        if self.error is not None:
            raise self.error
        assert self.answer is not None, "an attempt woken without an answer"
        return self.answer


@dataclass
class _Saga:
    """Attempts of one saga waiting for their outcome to be recorded, and whether a thread is recording now."""

    waiting: list[_Attempt] = field(default_factory=list)
    recording: bool = False


_sagas: dict[uuid.UUID, _Saga] = {}
STOPPED = "the thread recording this outcome stopped first; the recovery sweep settles it when its lease ends"
_guard = threading.Lock()


def record_grouped(
    claim: Claim, outcome: executor.Outcome, follow_up: FollowUp | None, rolled_back: Callable[[], None]
) -> Answer:
    """`record_outcome`, sharing the transaction with attempts of the same saga that finish meanwhile.

    `rolled_back` is called if a shared transaction that ran `follow_up` rolls back, before the attempt is recorded
    again on its own (the follow-up runs again there)."""
    attempt = _Attempt(claim, outcome, follow_up, rolled_back)
    with _guard:
        saga = _sagas.setdefault(claim.saga_id, _Saga())
        saga.waiting.append(attempt)
        leads = not saga.recording
        saga.recording = True
    while not leads:
        attempt.done.wait()
        if not attempt.leads:
            return attempt.result()
        attempt.leads, leads = False, True
        attempt.done.clear()
    _record_what_gathered(claim.saga_id, saga)
    return attempt.result()


def _record_what_gathered(saga_id: uuid.UUID, saga: _Saga) -> None:
    with _guard:
        batch, saga.waiting = saga.waiting, []
    try:
        _record(batch)
    finally:
        # Whatever stopped this thread (even a KeyboardInterrupt), no waiting attempt may wait forever.
        for attempt in batch:
            if not attempt.done.is_set():
                attempt.settle(None, RuntimeError(STOPPED))
        _hand_over(saga_id, saga)


def _hand_over(saga_id: uuid.UUID, saga: _Saga) -> None:
    with _guard:
        if saga.waiting:
            successor = saga.waiting[0]  # arrived while this batch was recorded: it records the next one
            successor.leads = True
            successor.done.set()
        else:
            saga.recording = False
            _sagas.pop(saga_id, None)


def _record(batch: list[_Attempt]) -> None:
    if len(batch) > 1:
        try:
            answers = record_outcomes([Recording(a.claim, a.outcome, a.follow_up, a.rolled_back) for a in batch])
        except ConnectionLost as lost:
            # Not one attempt's fault, and already retried: recording them one by one would only retry it again.
            for attempt in batch:
                attempt.rolled_back()
                attempt.settle(None, lost)
            return
        except Exception:
            logger.info("a grouped record failed; recording its %d attempts one by one", len(batch))
            for attempt in batch:
                attempt.rolled_back()  # the claims its follow-up made were rolled back with the transaction
        else:
            for attempt, answer in zip(batch, answers, strict=True):
                attempt.settle(answer, None)
            return
    for attempt in batch:
        try:
            answer = record_outcome(attempt.claim, attempt.outcome, attempt.follow_up, attempt.rolled_back)
            attempt.settle(answer, None)
        except Exception as error:
            attempt.settle(None, error)
