"""Console pages that read one saga (detail), the whole tenant (dashboard) and its governance evidence (policy).

Reads only, tenant-scoped by the acting Principal. The saga detail is built on selectors.saga_timeline, so the
page shows what the payload-free timeline shows agents: no results, contract snapshots, checkpoint data or audit
payloads beyond the small evidence fields. The one payload it shows is what an approver judges: each approval
request's node input, beside the digest the approval binds to (sagas.selectors.approvals).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.db.models import Count
from django.utils import timezone
from django.utils.safestring import SafeString

from audit.models import AuditEvent
from audit.models import EventType as E
from governance import kill_switch
from governance.identity.principal import Principal
from governance.identity.rbac import READ, authorize
from governance.models import KillSwitch
from sagas import selectors
from sagas.console import dag
from sagas.console.queues import (
    QueueItem,
    RecoveryCase,
    approval_queue,
    pending_approval_count,
    recovery_cases,
    recovery_count,
)
from sagas.models import Approval, Saga
from sagas.selectors.approvals import ApprovalContext, approval_contexts
from sagas.selectors.scope import tenant_sagas
from sagas.states import RECOVERABLE_SAGA_STATES, SagaStatus, StepStatus
from sagas.states import NodeStatus as N

# How many of the oldest waiting items the dashboard shows: enough to see what is stuck, short enough to scan.
DASHBOARD_OLDEST = 5
# Policy decisions listed on the policy page, newest first.
POLICY_DECISIONS_SHOWN = 50


@dataclass(frozen=True)
class SagaActions:
    """Which saga-level buttons apply in the saga's current state (the coordinator re-checks every one)."""

    run: bool
    commit: bool
    rollback: bool
    retry_compensation: bool
    resume_rollback: bool
    preview: bool = False  # a preview saga: its report, and promotion to a real saga
    promote: bool = False


@dataclass
class SagaDetail:
    saga: Saga
    timeline: dict[str, Any]
    # Every approval request of the saga, oldest first, with the input it binds to and why it was required.
    approvals: list[ApprovalContext]
    svg: SafeString
    actions: SagaActions
    # The timeline's node dicts plus `depends_on_labels` (keys where nodes have them: what an operator reads).
    nodes: list[dict[str, Any]] = field(default_factory=list)
    problems: list[Any] = field(default_factory=list)


def saga_detail(*, actor: Principal, saga_id: object) -> SagaDetail:
    """Everything the detail page shows. Raises NotFound for a missing or another tenant's saga."""
    timeline = selectors.saga_timeline(actor=actor, saga_id=saga_id)
    saga = selectors.saga_get(actor=actor, saga_id=saga_id)
    approvals = list(Approval.objects.filter(node__saga=saga).select_related("node").order_by("created_at", "id"))
    contexts = approval_contexts(approvals)
    nodes = dag.nodes_from_timeline(timeline["nodes"])
    cases = recovery_cases(actor=actor, saga_id=saga.id)
    labels = {n["id"]: n["key"] or n["id"][:8] for n in timeline["nodes"]}
    rows = [{**n, "depends_on_labels": [labels.get(d, d) for d in n["depends_on"]]} for n in timeline["nodes"]]
    return SagaDetail(
        saga=saga,
        timeline=timeline,
        approvals=[contexts[a.id] for a in approvals],
        svg=dag.render_svg(nodes, label=f"Workflow DAG of saga {saga.id}"),
        actions=saga_actions(saga, timeline),
        nodes=rows,
        problems=cases[0].problems if cases else [],
    )


def saga_actions(saga: Saga, timeline: dict[str, Any]) -> SagaActions:
    statuses = [n["status"] for n in timeline["nodes"]]
    immediate = [s["status"] for s in timeline["steps"] if not s["node_id"]]
    active = saga.status == SagaStatus.ACTIVE
    lease_live = saga.lease_expires_at is not None and saga.lease_expires_at > timezone.now()
    if saga.preview:
        # A preview runs nothing and never commits: a run dry-runs every node not yet evaluated.
        return SagaActions(
            run=active and any(s != N.DRY for s in statuses),
            commit=False,
            rollback=saga.status in RECOVERABLE_SAGA_STATES,
            retry_compensation=False,
            resume_rollback=False,
            preview=True,
            promote=saga.status != SagaStatus.ROLLED_BACK,
        )
    return SagaActions(
        run=active and N.READY in statuses,
        commit=active and all(s == N.COMPLETED for s in statuses) and all(s == StepStatus.COMPLETED for s in immediate),
        rollback=saga.status in RECOVERABLE_SAGA_STATES,
        retry_compensation=saga.status == SagaStatus.ROLLBACK_FAILED,
        # FAILED = rollback pending; ROLLING_BACK without a live runner = interrupted. Both resume on request.
        resume_rollback=saga.status in (SagaStatus.FAILED, SagaStatus.ROLLING_BACK) and not lease_live,
    )


@dataclass
class Dashboard:
    status_counts: list[tuple[str, int]]
    total: int
    pending_approvals: int
    recovery: int
    oldest_approvals: list[QueueItem]
    oldest_recovery: list[RecoveryCase]
    kill_switch: KillSwitch | None


def dashboard(*, actor: Principal) -> Dashboard:
    """The landing page's numbers for the actor's tenant."""
    authorize(actor, READ, "list_sagas")
    rows = tenant_sagas(actor).order_by().values("status").annotate(n=Count("id"))
    counts: dict[str, int] = {row["status"]: row["n"] for row in rows}
    cases = recovery_cases(actor=actor, limit=DASHBOARD_OLDEST)
    return Dashboard(
        status_counts=[(status, counts.get(status, 0)) for status in SagaStatus.values],
        total=sum(counts.values()),
        pending_approvals=pending_approval_count(actor=actor),
        recovery=recovery_count(actor=actor),
        oldest_approvals=approval_queue(actor=actor, limit=DASHBOARD_OLDEST),
        oldest_recovery=cases,
        kill_switch=kill_switch.engaged(actor.tenant_id),
    )


def policy_page(*, actor: Principal, limit: int = POLICY_DECISIONS_SHOWN) -> dict[str, Any]:
    """Governance status of the actor's tenant and its newest POLICY_DECISION audit events."""
    status = selectors.policy_status(actor=actor)
    authorize(actor, READ, "policy_decisions")
    events = (
        AuditEvent.objects.filter(tenant_id=actor.tenant_id, event_type=E.POLICY_DECISION)
        .order_by("-created_at_text", "-sequence")
        .values("saga_id", "sequence", "node_id", "action", "status", "data", "created_at_text", "actor_principal_id")[
            :limit
        ]
    )
    return {"status": status, "decisions": list(events)}
