"""One attempt of a journaled step, in three phases (docs/architecture.md section 5), shared by node attempts
(sagas.coordinator.execution.node_attempts) and immediate steps (sagas.coordinator.execution.immediate_steps).

1. claim, in a short transaction: the step row is written EXECUTING with its contract snapshot before anything
   is called (write-ahead), under a lease whose fence token this attempt carries in its `Claim`;
2. call, outside any transaction: the action runs with the step id as idempotency key while the lease is kept
   alive (sagas.coordinator._leases.heartbeat);
3. record, in a short transaction: the outcome is written only if the fence still matches; a stale worker's
   outcome is audited (STALE_WRITE_REFUSED) and dropped. A retryable failure with attempts left is scheduled
   again under the same step id; an exhausted one applies the contract's failure_mode to the saga.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any, NamedTuple

from django.utils import timezone

from audit import telemetry
from audit.models import EventType as E
from governance.identity.principal import Principal
from registry.actions import InvocationContext
from registry.contracts import backoff_seconds
from sagas import executor
from sagas.coordinator import _actions, _graph
from sagas.coordinator._leases import RELEASED, LeaseRef, heartbeat, seconds_from_now
from sagas.coordinator._steps import journal_step
from sagas.coordinator._tx import Tx, locked_saga
from sagas.coordinator.execution import nudges
from sagas.coordinator.execution.record_retry import Tried, retry_on_lost_connection
from sagas.coordinator.sql import statements
from sagas.models import Node, Step
from sagas.states import NodeStatus, SagaStatus, StepStatus

# What a recorded outcome leads to in the same commit: the next claim of the same run, if any (node attempts).
FollowUp = Callable[[Tx], "Claim | None"]


@dataclass(frozen=True)
class Claim:
    """An attempt this process owns: what to call, and the fence that proves ownership when recording."""

    actor: Principal
    saga_id: uuid.UUID
    step_id: uuid.UUID
    node_id: uuid.UUID | None
    fence: int
    attempt: int
    pinned: _actions.Pinned
    input: dict[str, Any]
    prior_receipt: Any = None  # the previous attempt's receipt, kept when it failed (see InvocationContext)

    def context(self) -> InvocationContext:
        return InvocationContext(
            saga_id=str(self.saga_id),
            step_id=str(self.step_id),
            idempotency_key=str(self.step_id),
            input=self.input,
            attempt=self.attempt,
            prior_receipt=self.prior_receipt,
        )

    def lease(self) -> LeaseRef:
        """Node attempts hold the node's lease; an immediate step holds its own."""
        if self.node_id is None:
            return LeaseRef(Step, self.step_id, self.fence)
        return LeaseRef(Node, self.node_id, self.fence)


# --- phase 1: claim (the caller's transaction) -------------------------------------------------------------------


def new_step(
    tx: Tx, pinned: _actions.Pinned, payload: dict[str, Any], node: Node | None, fence: int, **lease: Any
) -> Step:
    """The write-ahead row: EXECUTING, first attempt, with the contract snapshot it runs under."""
    return journal_step(tx, pinned, payload, node, status=StepStatus.EXECUTING, attempts=1, fence_token=fence, **lease)


def prior_receipt(step: Step) -> Any:
    """The receipt the failed attempt left in its error (read before the retry clears the error)."""
    return (step.error or {}).get("receipt") if isinstance(step.error, dict) else None


# --- phase 2: call (no transaction) -------------------------------------------------------------------------------


def perform(claim: Claim) -> executor.Outcome:
    """Call the action with the step id as idempotency key, keeping the claim's lease alive meanwhile."""
    started = time.monotonic()
    with heartbeat(claim.lease()):
        outcome = executor.perform(claim.pinned.definition, claim.context(), compensation=False)
    seconds = time.monotonic() - started
    telemetry.observe_seconds(
        "saga.attempt.duration", "Time an action call took", seconds, outcome="ok" if outcome.ok else "failed"
    )
    return outcome


# --- phase 3: record ----------------------------------------------------------------------------------------------


class Recording(NamedTuple):
    """One outcome to record: its claim, what follows in the same commit, and what undoes the follow-up's effects
    outside the database if that commit does not happen (the threads it reserved: fan_out.LocalClaims.release)."""

    claim: Claim
    outcome: executor.Outcome
    follow_up: FollowUp | None = None
    rolled_back: Callable[[], None] | None = None


Answer = tuple[str, "Claim | None"]


def record_outcome(
    claim: Claim,
    outcome: executor.Outcome,
    follow_up: FollowUp | None = None,
    rolled_back: Callable[[], None] | None = None,
) -> Answer:
    """Record the outcome if the claim still owns its lease; `follow_up` then runs in the same commit (a node's
    next claim). Returns the verdict ('completed', 'retry', 'failed' or 'stale') and the follow-up's claim."""
    return record_outcomes([Recording(claim, outcome, follow_up, rolled_back)])[0]


def record_outcomes(attempts: list[Recording]) -> list[Answer]:
    """`record_outcome` for several attempts of one saga in one commit (sagas.coordinator.execution.group_commit): every
    outcome is recorded first, then each follow-up runs, in order, on what they all left.

    A transaction cut off by a lost database connection is recorded again with the same claims and outcomes
    (sagas.coordinator.execution.record_retry); one whose COMMIT had gone through is found recorded and not written
    twice."""
    checked = [r._replace(outcome=_checked_outcome(r.claim, r.outcome)) for r in attempts]
    first = checked[0].claim
    what = f"the outcome of step {first.step_id} of saga {first.saga_id}" + (
        f" (with {len(checked) - 1} more in the same commit)" if len(checked) > 1 else ""
    )
    tried: Tried[list[Answer]] = Tried()
    return retry_on_lost_connection(partial(_record_once, checked, tried), what=what)


def _record_once(checked: list[Recording], tried: Tried[list[Answer]], retry: int) -> list[Answer]:
    first = checked[0].claim
    # Each node attempt's fence is checked against its node and step as read under the lock, in the lock's round trip.
    fences = [statements.node_and_step(r.claim.node_id, r.claim.step_id) for r in checked if r.claim.node_id]
    with locked_saga(first.saga_id, first.actor, also=fences) as tx:
        read = iter(tx.also_rows)
        pairs = [
            _held(r.claim, next(read)) if r.claim.node_id else (None, Step.objects.get(pk=r.claim.step_id))
            for r in checked
        ]
        before = [_recorded_before(r, node, step) for r, (node, step) in zip(checked, pairs, strict=True)]
        if tried.answers is not None and any(before):
            return tried.committed_already(what=f"the outcome of step {first.step_id} of saga {first.saga_id}")
        if retry:
            _undo_follow_ups(checked)  # the try before rolled back: the claims its follow-ups made never existed
        tried.forget()
        verdicts = []
        for r, (node, step), done in zip(checked, pairs, before, strict=True):
            tx.actor = r.claim.actor
            verdicts.append(done or _record_one(tx, r.claim, r.outcome, node, step))
        answers: list[Answer] = []
        for r, verdict, done in zip(checked, verdicts, before, strict=True):
            tx.actor = r.claim.actor
            follows = r.follow_up is not None and verdict != "stale" and not done
            answers.append((verdict, r.follow_up(tx) if follows and r.follow_up else None))
        tried.keep(answers)
        return answers


def _undo_follow_ups(checked: list[Recording]) -> None:
    for r in checked:
        if r.rolled_back is not None:
            r.rolled_back()


def _recorded_before(r: Recording, node: Node | None, step: Step) -> str | None:
    """The verdict an earlier try of this record wrote, found under the claim's own fence (its COMMIT went through
    but the answer was lost), or None when the outcome is not written yet or the fence is someone else's."""
    holder: Node | Step = node if node is not None else step
    if holder.fence_token != r.claim.fence or holder.attempts != r.claim.attempt:
        return None
    if step.status == StepStatus.EXECUTING or (node is not None and node.status == NodeStatus.EXECUTING):
        return None
    if r.outcome.ok:
        return "completed" if step.status == StepStatus.COMPLETED else None
    if step.status != StepStatus.FAILED:
        return None
    return "retry" if "next_attempt_in_seconds" in (step.error or {}) else "failed"


def _held(claim: Claim, rows: list[tuple[Any, ...]]) -> tuple[Node, Step]:
    pair = statements.node_and_step_from(rows)
    if pair is None:
        raise Node.DoesNotExist(f"node {claim.node_id} or its step {claim.step_id} no longer exists")
    return pair


def _record_one(tx: Tx, claim: Claim, outcome: executor.Outcome, node: Node | None, step: Step) -> str:
    if not _owns(tx, claim, node, step):
        return "stale"
    if outcome.ok:
        _record_success(tx, node, step, outcome.result)
        verdict = "completed"
    else:
        verdict = _record_failure(tx, claim, node, step, outcome)
    telemetry.count("saga.attempts", "Action attempts by outcome", outcome=verdict)
    return verdict


def apply_failure_mode(tx: Tx, failure_mode: str, error: dict[str, Any]) -> None:
    """An exhausted or refused attempt stops its ACTIVE saga: `pause` waits in RECOVERY_REQUIRED for an operator,
    anything else (`rollback`) marks it FAILED, the rollback pending until nothing is in flight."""
    if tx.saga.status != SagaStatus.ACTIVE:
        return
    if failure_mode == "pause":
        tx.transition(tx.saga, SagaStatus.RECOVERY_REQUIRED, event=E.RECOVERY_REQUIRED, error=error)
    else:
        tx.transition(tx.saga, SagaStatus.FAILED, event=E.SAGA_FAILED, error=error)


def _checked_outcome(claim: Claim, outcome: executor.Outcome) -> executor.Outcome:
    """Output is validated after the call; a bad output keeps its receipt and counts as a permanent failure."""
    if not outcome.ok:
        return outcome
    errors = _actions.output_errors(claim.pinned.definition, outcome.result)
    if not errors:
        return outcome
    error = {
        "code": "OUTPUT_INVALID",
        "message": f"{claim.pinned.action}@{claim.pinned.version} answered with output that does not match its "
        f"output_schema: {'; '.join(errors[:5])}. The answer is kept as the step's receipt.",
        "retryable": False,
        "uncertain": False,
    }
    return executor.Outcome(ok=False, result=outcome.result, error=error)


def _owns(tx: Tx, claim: Claim, node: Node | None, step: Step) -> bool:
    """Whether the claim's fence still holds on its node (or, for an immediate step, its step) as read under the
    lock; a stale worker's outcome is refused and audited."""
    holder: Node | Step = node if node is not None else step
    still_ours = holder.fence_token == claim.fence and step.status == StepStatus.EXECUTING
    if node is not None:
        still_ours = still_ours and node.status == NodeStatus.EXECUTING
    if not still_ours:
        # A stale worker: someone reclaimed the lease. Its outcome is evidence, never state.
        tx.record(
            E.STALE_WRITE_REFUSED,
            node=node,
            step=step,
            status=step.status,
            data={"attempt": claim.attempt, "fence_token": claim.fence},
        )
    return still_ours


def _record_success(tx: Tx, node: Node | None, step: Step, result: Any) -> None:
    release = {"lease_owner": "", "lease_expires_at": None} if node is None else {}
    tx.transition(
        step,
        StepStatus.COMPLETED,
        event=E.STEP_COMPLETED,
        result=result,
        error=None,
        uncertain_outcome=False,
        **release,
    )
    if node is None:
        return
    tx.transition(
        node,
        NodeStatus.COMPLETED,
        event=E.NODE_COMPLETED,
        result=result,
        error=None,
        **RELEASED,
        uncertain_outcome=False,
    )
    _graph.promote_dependants(tx, node)


def _record_failure(tx: Tx, claim: Claim, node: Node | None, step: Step, outcome: executor.Outcome) -> str:
    error = dict(outcome.error or {})
    policy = claim.pinned.policy
    attempts_left = claim.attempt < int(policy["forward"]["max_attempts"])
    receipt = outcome.result if outcome.result is not None else step.result
    if outcome.retryable and attempts_left and tx.saga.status == SagaStatus.ACTIVE:
        _schedule_retry(tx, claim, node, step, error, receipt, outcome.uncertain)
        return "retry"
    error["attempts"] = claim.attempt
    release = {"lease_owner": "", "lease_expires_at": None} if node is None else {}
    tx.transition(
        step,
        StepStatus.FAILED,
        event=E.STEP_FAILED,
        error=error,
        result=receipt,
        uncertain_outcome=outcome.uncertain,
        **release,
    )
    if node is not None:
        tx.transition(
            node,
            NodeStatus.FAILED,
            event=E.NODE_FAILED,
            error=error,
            uncertain_outcome=outcome.uncertain,
            **RELEASED,
        )
        _graph.block_dependants(tx, node, "a dependency failed")
    apply_failure_mode(tx, str(policy["failure_mode"]), {**error, "step_id": str(step.id)})
    return "failed"


def _schedule_retry(
    tx: Tx, claim: Claim, node: Node | None, step: Step, error: dict[str, Any], receipt: Any, uncertain: bool
) -> None:
    """Deterministic, jittered backoff seeded by the step id; the next attempt reuses the same step id."""
    delay = backoff_seconds(claim.pinned.policy["forward"], claim.attempt, str(step.id))
    error["next_attempt_in_seconds"] = round(delay, 3)
    tx.transition(
        step, StepStatus.FAILED, event=E.STEP_ATTEMPT_FAILED, error=error, result=receipt, uncertain_outcome=uncertain
    )
    if node is not None:
        tx.transition(
            node,
            NodeStatus.READY,
            error=error,
            **RELEASED,
            next_attempt_at=seconds_from_now(delay),
            dispatched_at=timezone.now(),
        )
        nudges.nudge_node(tx.saga.id, node.id, delay=delay)
    tx.record(
        E.STEP_RETRY_SCHEDULED,
        node=node,
        step=step,
        status=StepStatus.FAILED,
        data={"attempt": claim.attempt, "delay_seconds": round(delay, 3), "error_code": error.get("code")},
    )
