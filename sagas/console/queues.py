"""What waits for an operator: the approval queue and the sagas that need recovery, for one tenant.

Reads only. Every function takes the acting Principal and sees that principal's tenant alone, exactly like the
protocol surfaces; another tenant's saga or node is indistinguishable from a missing one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.db.models import Q, QuerySet
from django.utils import timezone

from audit.models import AuditEvent
from audit.models import EventType as E
from governance.identity.principal import Principal
from governance.identity.rbac import READ, authorize
from sagas import selectors
from sagas.errors import NotFound
from sagas.models import Approval, Node, Saga, Step
from sagas.selectors.approvals import ApprovalContext, approval_contexts, pending_of, waiting_contexts
from sagas.selectors.scope import parse_uuid, tenant_sagas
from sagas.states import RECOVERABLE_SAGA_STATES, SagaStatus, StepStatus
from sagas.states import NodeStatus as N

# Rows per console page. The queues are worked oldest first, so the head is what matters; a tenant with more
# waiting than this has a bigger problem than paging, and the counts on the dashboard still say how many.
QUEUE_LIMIT = 200
# Nodes one bulk decision may name: bounds the work (one transaction each) a single form post can ask for.
MAX_BULK_NODES = 100


@dataclass(frozen=True)
class QueueItem:
    """One node waiting for a human decision, with what an approver needs to judge it."""

    node: Node
    approval: Approval
    context: ApprovalContext
    planned_by: str
    now: datetime

    @property
    def risk(self) -> str:
        return self.context.risk

    @property
    def reversibility(self) -> str:
        return self.context.reversibility

    @property
    def age(self) -> timedelta:
        return self.now - self.approval.created_at

    @property
    def expired(self) -> bool:
        return self.approval.expires_at is not None and self.approval.expires_at <= self.now


@dataclass(frozen=True)
class Decision:
    """One node named on the decide page, with its pending request's context (None: not waiting any more, and the
    coordinator will say so when asked to decide it)."""

    node: Node
    context: ApprovalContext | None


def _pending(actor: Principal) -> QuerySet[Approval]:
    return selectors.pending_approvals(actor)


def pending_approval_count(*, actor: Principal) -> int:
    authorize(actor, READ, "get")
    return _pending(actor).count()


def approval_queue(*, actor: Principal, limit: int = QUEUE_LIMIT) -> list[QueueItem]:
    """WAITING_APPROVAL nodes of the actor's tenant, oldest request first (served by approval_status_created_idx)."""
    authorize(actor, READ, "get")
    approvals = list(_pending(actor).select_related("node", "node__saga").order_by("created_at", "id")[:limit])
    contexts = approval_contexts(approvals)
    planners = _planners(actor, [a.node for a in approvals])
    now = timezone.now()
    return [
        QueueItem(
            node=a.node,
            approval=a,
            context=contexts[a.id],
            planned_by=planners.get(str(a.node.id), ""),
            now=now,
        )
        for a in approvals
    ]


def decisions(nodes: list[Node]) -> list[Decision]:
    """The decide page's rows: each named node (from tenant_nodes) with what its approver judges."""
    contexts = waiting_contexts(nodes)
    return [
        Decision(node, contexts.get(pending.id) if (pending := pending_of(node)) is not None else None)
        for node in nodes
    ]


def _planners(actor: Principal, nodes: list[Node]) -> dict[str, str]:
    """Who planned each node, from the NODE_PLANNED audit event (the node row does not keep it)."""
    if not nodes:
        return {}
    rows = AuditEvent.objects.filter(
        tenant_id=actor.tenant_id, event_type=E.NODE_PLANNED, node_id__in=[str(n.id) for n in nodes]
    ).values_list("node_id", "actor_principal_id")
    return dict(rows)


def tenant_nodes(*, actor: Principal, node_ids: list[str]) -> list[Node]:
    """The named nodes of the actor's tenant, in the order given; NotFound if any is missing or another tenant's."""
    authorize(actor, READ, "get")
    if not node_ids or len(node_ids) > MAX_BULK_NODES:
        raise NotFound("NODE_NOT_FOUND", f"Name between 1 and {MAX_BULK_NODES} nodes.")
    parsed = [parse_uuid(n) for n in node_ids]
    found = {
        str(n.id): n
        for n in Node.objects.filter(saga__tenant_id=actor.tenant_id, pk__in=[p for p in parsed if p])
        .select_related("saga")
        .prefetch_related("approvals")
    }
    missing = [ref for ref, p in zip(node_ids, parsed, strict=True) if p is None or str(p) not in found]
    if missing:
        raise NotFound("NODE_NOT_FOUND", f"Node not found: {missing[0]}.")
    return list({str(p): found[str(p)] for p in parsed if p}.values())


# --- recovery --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Problem:
    """Why a saga waits for an operator, and which node-level actions answer it."""

    kind: str  # uncertain_outcome | rejected_approval | expired_approval | failed_node | failed_compensation |
    # expired_lease | saga_error
    title: str
    detail: str
    node: Node | None = None
    step: Step | None = None
    retry: bool = False  # node_retry applies
    force: bool = False  # node_retry needs force=True (the operator reconciled the external outcome)


@dataclass
class RecoveryCase:
    saga: Saga
    problems: list[Problem] = field(default_factory=list)

    @property
    def can_rollback(self) -> bool:
        return self.saga.status in RECOVERABLE_SAGA_STATES

    @property
    def can_retry_compensation(self) -> bool:
        return self.saga.status == SagaStatus.ROLLBACK_FAILED

    @property
    def can_resume_rollback(self) -> bool:
        return self.saga.status in (SagaStatus.FAILED, SagaStatus.ROLLING_BACK)


def _expired_leases() -> tuple[Q, Q, Q]:
    now = timezone.now()
    node = Q(status=N.EXECUTING, lease_expires_at__lt=now)
    step = Q(status=StepStatus.EXECUTING, node__isnull=True, lease_expires_at__lt=now)
    # A rollback runner that stopped renewing its saga lease (the sweeper resumes it; an operator may too).
    saga = Q(status=SagaStatus.ROLLING_BACK, lease_expires_at__lt=now)
    return node, step, saga


def recovery_sagas(actor: Principal) -> QuerySet[Saga]:
    """The tenant's sagas an operator should look at, least recently changed first."""
    node, step, saga = _expired_leases()
    return (
        tenant_sagas(actor)
        .filter(
            Q(status__in=[SagaStatus.RECOVERY_REQUIRED, SagaStatus.ROLLBACK_FAILED])
            | Q(pk__in=Node.objects.filter(node).values("saga_id"))
            | Q(pk__in=Step.objects.filter(step).values("saga_id"))
            | saga
        )
        .order_by("updated_at", "id")
    )


def recovery_count(*, actor: Principal) -> int:
    authorize(actor, READ, "get")
    return recovery_sagas(actor).count()


def recovery_cases(*, actor: Principal, saga_id: object = None, limit: int = QUEUE_LIMIT) -> list[RecoveryCase]:
    """Each saga needing recovery with its problems; one saga only when `saga_id` is given."""
    authorize(actor, READ, "get")
    sagas = recovery_sagas(actor)
    if saga_id is not None:
        parsed = parse_uuid(saga_id)
        sagas = sagas.filter(pk=parsed) if parsed else sagas.none()
    cases = [RecoveryCase(saga) for saga in sagas[:limit]]
    for case in cases:
        case.problems = problems_of(case.saga)
    return cases


def problems_of(saga: Saga) -> list[Problem]:
    """What went wrong in this saga, node by node, then step by step, then the saga's own error."""
    now = timezone.now()
    found = [p for node in saga.nodes.order_by("position") if (p := _node_problem(saga, node, now))]
    steps = saga.steps.filter(
        Q(status=StepStatus.COMPENSATION_FAILED) | Q(status=StepStatus.EXECUTING, node__isnull=True)
    )
    found += [p for step in steps.order_by("sequence") if (p := _step_problem(step, now))]
    if saga.status == SagaStatus.ROLLING_BACK and saga.lease_expires_at and saga.lease_expires_at < now:
        found.append(
            Problem(
                "expired_lease",
                "Rollback interrupted",
                "The rollback runner stopped renewing its lease. The recovery sweeper resumes it; you can too.",
            )
        )
    if not found and saga.error:
        found.append(Problem("saga_error", "Saga error", _message(saga.error)))
    return found


def _message(error: Any) -> str:
    if isinstance(error, dict):
        return str(error.get("message") or error.get("code") or error)
    return str(error or "")


def _node_problem(saga: Saga, node: Node, now: datetime) -> Problem | None:
    retryable = saga.status in RECOVERABLE_SAGA_STATES
    if node.status == N.EXECUTING and node.lease_expires_at and node.lease_expires_at < now:
        return Problem(
            "expired_lease",
            "Expired lease",
            f"The worker running this node stopped renewing its lease at {node.lease_expires_at:%Y-%m-%d %H:%M:%S} "
            "UTC. The recovery sweeper applies the contract's outcome (re-run if idempotent, else compensate or "
            "pause); roll back to unwind now.",
            node=node,
        )
    if node.status == N.FAILED and node.uncertain_outcome:
        return Problem(
            "uncertain_outcome",
            "Uncertain outcome",
            f"The last attempt may or may not have taken effect. {_message(node.error)} Check the downstream "
            "system, then force a retry or roll back.",
            node=node,
            retry=retryable,
            force=True,
        )
    if node.status == N.FAILED:
        return Problem(
            "failed_node",
            "Failed node (retries exhausted)",
            f"Failed after {node.attempts} attempt(s): {_message(node.error)}",
            node=node,
            retry=retryable,
        )
    if node.status == N.REJECTED:
        expired = isinstance(node.error, dict) and node.error.get("code") == "APPROVAL_EXPIRED"
        return Problem(
            "expired_approval" if expired else "rejected_approval",
            "Approval expired" if expired else "Approval rejected",
            _message(node.error) or "Its approval was rejected.",
            node=node,
            retry=retryable,
        )
    return None


def _step_problem(step: Step, now: datetime) -> Problem | None:
    if step.status == StepStatus.COMPENSATION_FAILED:
        return Problem(
            "failed_compensation",
            "Failed compensation",
            f"Compensating step {step.sequence} ({step.action}@{step.action_version}) failed after "
            f"{step.compensation_attempts} attempt(s): {_message(step.compensation_error)}",
            step=step,
        )
    if step.lease_expires_at and step.lease_expires_at < now:
        return Problem(
            "expired_lease",
            "Expired lease",
            f"The caller executing step {step.sequence} ({step.action}) stopped renewing its lease; its outcome is "
            "unknown. The recovery sweeper applies the contract's failure mode.",
            step=step,
        )
    return None
