"""The operations' handlers: actor first, validated arguments second, a JSON-ready dict back.

Each is a few lines that call the coordinator (writes) or a selector (reads) and shape the answer; none writes to
the ORM or checks RBAC itself (sagas.operations.invoke does, before the handler runs, and the coordinator and
selectors check again). Handlers are synchronous ORM units: async surfaces run them off the event loop.
"""

from __future__ import annotations

from typing import Any

from governance.identity.principal import Principal
from registry.errors import RegistryError
from registry.selectors import action_detail, action_get, action_list, action_summary
from sagas import coordinator, selectors
from sagas.errors import NotFound
from sagas.operations.arguments import (
    ActionArgs,
    ApproveArgs,
    AuditArgs,
    BeginArgs,
    CheckpointArgs,
    ExecuteArgs,
    ListApprovalsArgs,
    ListSagasArgs,
    NoArgs,
    PlanArgs,
    PolicyDecisionsArgs,
    PolicyStatusArgs,
    RejectArgs,
    RetryArgs,
    RollbackArgs,
    RunArgs,
    SagaRef,
    TimelineArgs,
    VerifyArgs,
)
from sagas.selectors import shapes

# --- sagas --------------------------------------------------------------------------------------------------------


def _saga(actor: Principal, saga_id: object) -> dict[str, Any]:
    return shapes.saga_to_dict(selectors.saga_get(actor=actor, saga_id=saga_id), read_just_now=True)


def begin(actor: Principal, a: BeginArgs) -> dict[str, Any]:
    return shapes.new_saga_to_dict(coordinator.saga_begin(actor=actor, metadata=a.metadata, preview=a.preview))


def get(actor: Principal, a: SagaRef) -> dict[str, Any]:
    return _saga(actor, a.saga_id)


def list_sagas(actor: Principal, a: ListSagasArgs) -> dict[str, Any]:
    page = selectors.saga_list(
        actor=actor,
        status=a.status,
        limit=a.limit,
        cursor=a.cursor,
        created_after=a.created_after,
        created_before=a.created_before,
        action=a.action,
    )
    return {"sagas": [shapes.saga_summary(s) for s in page.sagas], "next_cursor": page.next_cursor}


def checkpoint(actor: Principal, a: CheckpointArgs) -> dict[str, Any]:
    saved = coordinator.saga_checkpoint(actor=actor, saga_id=a.saga_id, name=a.name, data=a.data)
    return {**shapes.checkpoint_to_dict(saved), "saga_id": str(saved.saga_id)}


def commit(actor: Principal, a: SagaRef) -> dict[str, Any]:
    return _saga(actor, coordinator.saga_commit(actor=actor, saga_id=a.saga_id).id)


def rollback(actor: Principal, a: RollbackArgs) -> dict[str, Any]:
    # A proxy session is unwound by the coordinator as `semantic-saga undo` does it (C and I calls listed, not
    # failed), with the options its undo recorded when this resumes one (sagas.coordinator._undo_walk).
    return _saga(actor, coordinator.saga_rollback(actor=actor, saga_id=a.saga_id, wait_seconds=a.wait_seconds).id)


def preview_report(actor: Principal, a: SagaRef) -> dict[str, Any]:
    return selectors.preview_report(actor=actor, saga_id=a.saga_id)


def promote(actor: Principal, a: SagaRef) -> dict[str, Any]:
    return _saga(actor, coordinator.saga_promote(actor=actor, saga_id=a.saga_id).id)


# --- workflow -----------------------------------------------------------------------------------------------------


def execute(actor: Principal, a: ExecuteArgs) -> dict[str, Any]:
    step = coordinator.saga_step_execute(actor=actor, saga_id=a.saga_id, action=a.action, input=a.input)
    return {**shapes.step_to_dict(step), "saga_status": step.saga.status}


def plan(actor: Principal, a: PlanArgs) -> dict[str, Any]:
    node = coordinator.node_plan(
        actor=actor,
        saga_id=a.saga_id,
        action=a.action,
        input=a.input,
        key=a.key,
        depends_on=a.depends_on,
        approval_required=a.approval_required,
    )
    return shapes.node_to_dict(node)


def run(actor: Principal, a: RunArgs) -> dict[str, Any]:
    report = coordinator.saga_run_ready(
        actor=actor,
        saga_id=a.saga_id,
        max_parallel=a.max_parallel,
        max_steps=a.max_steps,
        wait_seconds=a.wait_seconds,
    )
    return {**_saga(actor, report.saga.id), "run": report.as_dict()}


def retry(actor: Principal, a: RetryArgs) -> dict[str, Any]:
    return shapes.node_to_dict(coordinator.node_retry(actor=actor, saga_id=a.saga_id, node_id=a.node_id, force=a.force))


# --- approvals ----------------------------------------------------------------------------------------------------


def approve(actor: Principal, a: ApproveArgs) -> dict[str, Any]:
    node = coordinator.node_approve(
        actor=actor, saga_id=a.saga_id, node_id=a.node_id, approved=a.approved, reason=a.reason
    )
    return shapes.node_to_dict(node)


def reject(actor: Principal, a: RejectArgs) -> dict[str, Any]:
    node = coordinator.node_approve(actor=actor, saga_id=a.saga_id, node_id=a.node_id, approved=False, reason=a.reason)
    return shapes.node_to_dict(node)


def list_approvals(actor: Principal, a: ListApprovalsArgs) -> dict[str, Any]:
    page = selectors.approvals_pending(actor=actor, limit=a.limit, cursor=a.cursor)
    return {"approvals": page.approvals, "next_cursor": page.next_cursor}


# --- evidence and governance --------------------------------------------------------------------------------------


def timeline(actor: Principal, a: TimelineArgs) -> dict[str, Any]:
    return selectors.saga_timeline(actor=actor, saga_id=a.saga_id, limit=a.limit)


def audit(actor: Principal, a: AuditArgs) -> dict[str, Any]:
    return selectors.saga_audit_events(actor=actor, saga_id=a.saga_id, limit=a.limit, event_types=a.event_types)


def verify(actor: Principal, a: VerifyArgs) -> dict[str, Any]:
    return selectors.saga_verify_audit(actor=actor, saga_id=a.saga_id)


def policy_status(actor: Principal, a: PolicyStatusArgs) -> dict[str, Any]:
    return selectors.policy_status(actor=actor, tenant_id=a.tenant_id)


def policy_decisions(actor: Principal, a: PolicyDecisionsArgs) -> dict[str, Any]:
    decisions = selectors.saga_audit_events(
        actor=actor, saga_id=a.saga_id, limit=a.limit, event_types=["POLICY_DECISION"]
    )
    # `events` is semantic-saga-mcp's answer: the decisions and the rollback/rejection safety overrides.
    seed = selectors.saga_audit_events(
        actor=actor, saga_id=a.saga_id, limit=a.limit, event_types=["POLICY_DECISION", "POLICY_SAFETY_OVERRIDE"]
    )
    return {"saga_id": decisions["saga_id"], "decisions": decisions["events"], "events": seed["events"]}


# --- the action registry ------------------------------------------------------------------------------------------


def list_actions(actor: Principal, a: NoArgs) -> dict[str, Any]:
    return {"actions": [action_summary(row) for row in action_list()]}


def get_action(actor: Principal, a: ActionArgs) -> dict[str, Any]:
    try:
        return action_detail(action_get(a.action, a.version, include_inactive=a.version is not None))
    except RegistryError as exc:
        raise NotFound(exc.code, exc.message) from exc
