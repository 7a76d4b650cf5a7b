"""Continuous recovery: reclaim what crashed workers, lost nudges and failed rollbacks left behind.

One sweep pass (`sagas_recover`) runs from Celery beat, a thread of the embedded server, or
`semantic-saga recover_sagas`. Each saga is handled in its own short transaction that takes the saga row with
SKIP LOCKED, so two sweepers never handle one saga twice and a saga a worker is writing is left for the next
pass. Conditions are re-checked under the lock. One bad saga is logged and skipped; it never stops the sweep.

What a pass does, in bounded batches:
- a node attempt whose lease expired (its worker died or was cut off) is fenced off (token + 1), then re-run
  with the same step id if the contract is `idempotent`, else marked FAILED with `uncertain_outcome` and the
  contract's failure_mode applied: `rollback` compensates it with its stable `<step id>:rollback` key, `pause`
  puts the saga in RECOVERY_REQUIRED for an operator;
- an immediate step whose caller died the same way is fenced off and failed as uncertain under its
  failure_mode; a proxied call's intent whose proxy died is first written as its step (sagas.coordinator.proxy.
  intents), so its outcome is recorded as unknown the same way;
- a FAILED saga with nothing in flight, an interrupted rollback (ROLLING_BACK, lease expired) and a
  ROLLBACK_FAILED saga whose retry time has come (transient failures only, with backoff) get a rollback runner
  (for a proxy session, its undo walk with the options the undo recorded: sagas.coordinator._undo_walk);
- a READY node of a live run whose nudge was lost (a broker outage) is nudged again;
- a call the MCP proxy held on an open request whose proxy process stopped (its lease lapsed), or one whose client
  was asked for its person's answer and did not come back within the confirm timeout, is withdrawn: nothing ran,
  and a later approve says so (sagas.coordinator._held_calls_gone).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta

from django.conf import settings
from django.db.models import Q, QuerySet
from django.db.models.functions import Now
from django.utils import timezone

from audit import telemetry
from audit.models import EventType as E
from registry.contracts import resolved_execution_policy
from sagas.coordinator import _graph, _held_calls_gone
from sagas.coordinator._leases import RELEASED
from sagas.coordinator._tx import Tx, system_saga_tx
from sagas.coordinator.execution import nudges
from sagas.coordinator.execution.attempts import apply_failure_mode
from sagas.coordinator.execution.ready_queries import capacity, executing_count, ready_due
from sagas.coordinator.rollback import saga_rollback_resume
from sagas.models import McpTask, Node, ProxyCallIntent, Saga, Step
from sagas.states import NodeStatus, SagaKind, SagaStatus, StepStatus

logger = logging.getLogger("sagas.recovery")

# Sagas handled per category per pass (SAGA_RECOVERY_BATCH, default 100): bounds one pass's time; the next pass
# continues.
# A READY node nudged longer ago than this without being claimed is nudged again (its message may be lost).
NUDGE_RESEND_SECONDS = 10.0

WORKER_LOST = {
    "code": "WORKER_LOST",
    "message": "The worker running this attempt stopped renewing its lease (it crashed or was cut off), so the "
    "attempt's outcome is unknown.",
    "uncertain": True,
}


@dataclass
class RecoveryReport:
    nodes_recovered: int = 0
    steps_recovered: int = 0
    rollbacks_started: int = 0
    nudges_resent: int = 0
    held_calls_withdrawn: int = 0
    errors: list[str] = field(default_factory=list)

    def summary(self) -> str:
        return (
            f"nodes_recovered={self.nodes_recovered} steps_recovered={self.steps_recovered} "
            f"rollbacks_started={self.rollbacks_started} nudges_resent={self.nudges_resent} "
            f"held_calls_withdrawn={self.held_calls_withdrawn} errors={len(self.errors)}"
        )


def sagas_recover(*, batch: int | None = None, inline_rollbacks: bool = False) -> RecoveryReport:
    """One sweep pass over at most `batch` sagas per category (default SAGA_RECOVERY_BATCH). `inline_rollbacks`
    runs rollbacks in this thread (the one-shot command) instead of nudging them to workers."""
    with telemetry.span("saga.recovery_sweep"):
        return _sweep(batch or settings.SAGA_RECOVERY_BATCH, inline_rollbacks)


def _sweep(batch: int, inline_rollbacks: bool) -> RecoveryReport:
    report = RecoveryReport()
    for saga_id in _sagas_with_expired_nodes(batch):
        _guarded(report, saga_id, lambda s: _recover_nodes(s, report))
    for saga_id in _sagas_with_lapsed_intents(batch):
        _guarded(report, saga_id, _write_intents)  # their steps then lapsed, handled just below
    for saga_id in _sagas_with_expired_immediate_steps(batch):
        _guarded(report, saga_id, lambda s: _recover_immediate(s, report))
    for saga_id in _sagas_needing_rollback(batch):
        _guarded(report, saga_id, lambda s: _start_rollback(s, report, inline_rollbacks))
    for saga_id in _sagas_with_lost_nudges(batch):
        _guarded(report, saga_id, lambda s: _resend_nudges(s, report))
    for saga_id in _sagas_with_abandoned_held_calls(batch):
        _guarded(report, saga_id, lambda s: _withdraw_held_calls(s, report))
    counts = (
        ("node", report.nodes_recovered),
        ("step", report.steps_recovered),
        ("rollback", report.rollbacks_started),
        ("nudge", report.nudges_resent),
        ("held_call", report.held_calls_withdrawn),
    )
    if any(amount for _, amount in counts):
        logger.info("recovery sweep %s", report.summary())
    for kind, amount in counts:
        for _ in range(amount):
            telemetry.count("saga.recovery", "Work reclaimed by the recovery sweep", kind=kind)
    return report


def _guarded(report: RecoveryReport, saga_id: uuid.UUID, work: Callable[[uuid.UUID], None]) -> None:
    try:
        work(saga_id)
    except Exception as exc:  # one bad saga must not stop the sweep; it is retried next pass and logged now
        logger.exception("recovery failed saga_id=%s", saga_id)
        report.errors.append(f"{saga_id}: {type(exc).__name__}: {exc}")


# --- finding candidates (no locks; every condition is re-checked under the saga lock) ------------------------------


def _sagas_with_expired_nodes(batch: int) -> list[uuid.UUID]:
    expired = Node.objects.filter(status=NodeStatus.EXECUTING, lease_expires_at__lt=Now())
    return list(expired.values_list("saga_id", flat=True).distinct()[:batch])


def _sagas_with_expired_immediate_steps(batch: int) -> list[uuid.UUID]:
    expired = Step.objects.filter(status=StepStatus.EXECUTING, node__isnull=True, lease_expires_at__lt=Now())
    return list(expired.values_list("saga_id", flat=True).distinct()[:batch])


def _sagas_with_lapsed_intents(batch: int) -> list[uuid.UUID]:
    lapsed = ProxyCallIntent.objects.filter(lease_expires_at__lt=Now())
    return list(lapsed.values_list("saga_id", flat=True).distinct()[:batch])


def _write_intents(saga_id: uuid.UUID) -> None:
    """A proxied call sent on an intent whose proxy stopped renewing it: the session's transaction writes the
    intent as its EXECUTING step (sagas.coordinator.proxy.intents), with the lapsed lease it had."""
    with system_saga_tx(saga_id):
        pass


def _sagas_needing_rollback(batch: int) -> list[uuid.UUID]:
    due = (
        Q(status=SagaStatus.FAILED)
        | Q(status=SagaStatus.ROLLING_BACK, lease_expires_at__lt=Now())
        | Q(status=SagaStatus.ROLLING_BACK, lease_expires_at__isnull=True)
        | Q(status=SagaStatus.ROLLBACK_FAILED, next_recovery_at__lte=Now())
    )
    return list(Saga.objects.filter(due).values_list("id", flat=True)[:batch])


def _sagas_with_lost_nudges(batch: int) -> list[uuid.UUID]:
    # Only nodes that were nudged and never claimed: a node made READY by an approval or a retry outside a live
    # wave waits for the next run request, exactly as without a sweeper.
    lost = Q(dispatched_at__lt=timezone.now() - timedelta(seconds=NUDGE_RESEND_SECONDS))
    due = Q(next_attempt_at__isnull=True) | Q(next_attempt_at__lte=Now())
    nodes = Node.objects.filter(status=NodeStatus.READY, saga__status=SagaStatus.ACTIVE, saga__run_steps_left__gt=0)
    return list(nodes.filter(lost & due).values_list("saga_id", flat=True).distinct()[:batch])


def _held_calls() -> QuerySet[Node]:
    return Node.objects.filter(
        status__in=_held_calls_gone.HELD_STATES,
        step__isnull=True,
        action__startswith="proxy.",
        saga__kind=SagaKind.PROXY_SESSION,
    )


def _abandoned_held_calls() -> QuerySet[Node]:
    """Held on an open request whose proxy process stopped renewing the lease."""
    return _held_calls().filter(lease_expires_at__lt=Now()).exclude(lease_owner="")


def _unclaimed_held_calls() -> QuerySet[Node]:
    """Not leased and past their confirm timeout (one held as an MCP task is left to its task: see below)."""
    return _held_calls().filter(lease_owner="", approvals__expires_at__lt=Now())


def _sagas_with_abandoned_held_calls(batch: int) -> list[uuid.UUID]:
    sagas = set(_abandoned_held_calls().values_list("saga_id", flat=True).distinct()[:batch])
    return list(sagas | set(_unclaimed_held_calls().values_list("saga_id", flat=True).distinct()[:batch]))


# --- recovering one saga -------------------------------------------------------------------------------------------


def _recover_nodes(saga_id: uuid.UUID, report: RecoveryReport) -> None:
    with system_saga_tx(saga_id) as tx:
        if tx is None:
            return  # another sweeper or a worker holds it now; the next pass looks again
        expired = Node.objects.filter(saga=tx.saga, status=NodeStatus.EXECUTING, lease_expires_at__lt=Now())
        for node in expired.select_related("step").order_by("position"):
            _recover_node(tx, node)
            report.nodes_recovered += 1
        if tx.saga.status == SagaStatus.FAILED and executing_count(tx.saga) == 0:
            nudges.nudge_rollback(tx.saga.id)


def _recover_node(tx: Tx, node: Node) -> None:
    step = node.step
    assert step is not None  # an EXECUTING node always has its step (written in the same claim)
    policy = resolved_execution_policy(step.action_definition)
    fence = node.fence_token + 1  # the lost worker's token no longer matches: its late write is refused
    release = {"fence_token": fence, "lease_owner": "", "lease_expires_at": None}
    if policy["idempotent"] and node.attempts < int(policy["forward"]["max_attempts"]):
        # Safe to repeat: the same step id (idempotency key) is sent again by whoever claims it next.
        tx.transition(
            node, NodeStatus.READY, event=E.NODE_RECOVERED, error=WORKER_LOST, dispatched_at=timezone.now(), **release
        )
        tx.update(tx.saga, run_steps_left=tx.saga.run_steps_left + 1)  # the lost attempt gives its budget back
        nudges.nudge_node(tx.saga.id, node.id)
        return
    error = {**WORKER_LOST, "retryable": False, "attempts": node.attempts}
    tx.transition(step, StepStatus.FAILED, event=E.STEP_RECOVERED, error=error, uncertain_outcome=True)
    tx.transition(node, NodeStatus.FAILED, event=E.NODE_RECOVERED, error=error, uncertain_outcome=True, **release)
    _graph.block_dependants(tx, node, "a dependency's worker was lost")
    apply_failure_mode(tx, str(policy["failure_mode"]), {**error, "step_id": str(step.id)})


def _recover_immediate(saga_id: uuid.UUID, report: RecoveryReport) -> None:
    with system_saga_tx(saga_id) as tx:
        if tx is None:
            return
        expired = Step.objects.filter(
            saga=tx.saga, node__isnull=True, status=StepStatus.EXECUTING, lease_expires_at__lt=Now()
        )
        for step in expired.order_by("sequence"):
            policy = resolved_execution_policy(step.action_definition)
            error = {**WORKER_LOST, "retryable": False, "attempts": step.attempts}
            tx.transition(
                step,
                StepStatus.FAILED,
                event=E.STEP_RECOVERED,
                error=error,
                uncertain_outcome=True,
                fence_token=step.fence_token + 1,
                **RELEASED,
            )
            apply_failure_mode(tx, str(policy["failure_mode"]), {**error, "step_id": str(step.id)})
            report.steps_recovered += 1


def _start_rollback(saga_id: uuid.UUID, report: RecoveryReport, inline: bool) -> None:
    with system_saga_tx(saga_id) as tx:
        if tx is None:
            return
        if tx.saga.status == SagaStatus.ROLLBACK_FAILED:
            # Claim this retry once: the next one waits for a new failure to schedule it.
            tx.update(tx.saga, recovery_attempts=tx.saga.recovery_attempts + 1, next_recovery_at=None)
        if not inline:
            nudges.nudge_rollback(tx.saga.id)
    report.rollbacks_started += 1
    if inline:
        saga_rollback_resume(saga_id=saga_id)


def _withdraw_held_calls(saga_id: uuid.UUID, report: RecoveryReport) -> None:
    with system_saga_tx(saga_id) as tx:
        if tx is None:
            return
        for node in _abandoned_held_calls().filter(saga=tx.saga).order_by("position"):
            _held_calls_gone.abandon(tx, node)
            report.held_calls_withdrawn += 1
        for node in _unclaimed_held_calls().filter(saga=tx.saga).distinct().order_by("position"):
            # A held call's MCP task finishes it itself (released late, or withdrawn), in whichever process.
            if not McpTask.objects.filter(node_id=str(node.id)).exists():
                _held_calls_gone.abandon(tx, node, unclaimed=True)
                report.held_calls_withdrawn += 1


def _resend_nudges(saga_id: uuid.UUID, report: RecoveryReport) -> None:
    stale = timezone.now() - timedelta(seconds=NUDGE_RESEND_SECONDS)
    with system_saga_tx(saga_id) as tx:
        if tx is None:
            return
        lost = ready_due(tx.saga).filter(dispatched_at__lt=stale)
        for node in lost[: capacity(tx)]:
            tx.update(node, dispatched_at=timezone.now())
            nudges.nudge_node(tx.saga.id, node.id)
            report.nudges_resent += 1
