"""The MCP tool table: name -> (strict arguments model, handler, RBAC operation, annotations, description).

Names, parameters and result shapes follow semantic-saga-mcp (docs/mcp.md) so its agents work
unchanged; fields are only ever added. Handlers are synchronous ORM units (run off the event loop by the server)
that call the coordinator or selectors and return JSON-ready dicts.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from governance.identity.principal import Principal
from governance.identity.rbac import authorize
from registry.errors import RegistryError
from registry.selectors import action_detail, action_get, action_list, action_summary
from sagas import coordinator, previews, selectors, shapes
from sagas.errors import NotFound


def storable_problem(value: object, where: str) -> str | None:
    """What makes `value` unstorable, if anything: text no database column can hold (a NUL character, which
    PostgreSQL refuses in text and jsonb, or an unpaired UTF-16 surrogate from a JSON escape)."""
    if isinstance(value, str):
        if "\x00" in value:
            return f"{where} contains a NUL character (\\u0000), which cannot be stored"
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return f"{where} contains an unpaired UTF-16 surrogate; send valid Unicode"
    elif isinstance(value, dict):
        for key, item in value.items():
            if problem := storable_problem(key, f"{where} (a key)") or storable_problem(item, f"{where}.{key}"):
                return problem
    elif isinstance(value, list):
        for index, item in enumerate(value):
            if problem := storable_problem(item, f"{where}[{index}]"):
                return problem
    return None


def argument_problems(error: ValidationError, root: str) -> list[str]:
    """One readable line per refused argument (`input.amount: Input should be a valid integer`), for every surface
    that reports a strict-argument refusal (MCP, REST)."""
    return [f"{'.'.join(str(p) for p in e['loc']) or root}: {e['msg']}" for e in error.errors(include_url=False)]


class Args(BaseModel):
    # Strict: unknown keys and wrong types are refused before anything runs ("5" is not an integer).
    model_config = ConfigDict(extra="forbid", strict=True)

    @model_validator(mode="after")
    def _storable(self) -> Args:
        # Refused here, once for MCP, A2A and REST, instead of as a database error after work began.
        for name, value in self.__dict__.items():
            if problem := storable_problem(value, name):
                raise ValueError(problem)
        return self


class SagaRef(Args):
    saga_id: str = Field(description="The saga's id (from begin_saga or list_sagas).")


class BeginArgs(Args):
    metadata: dict[str, Any] = Field(default_factory=dict, description="Your own labels for the saga.")
    preview: bool = Field(
        default=False,
        description="true: a dry run. Plan, execute and run do everything except the side effect (nothing reaches "
        "the world); get_preview_report shows what would happen, promote_preview runs it for real.",
    )


class ExecuteArgs(SagaRef):
    action: str = Field(description="A registered action id (list_actions).")
    input: dict[str, Any] = Field(description="Input matching the action's input_schema (get_action).")


class PlanArgs(ExecuteArgs):
    key: str | None = Field(default=None, description="Your unique name for the node; replanning it is idempotent.")
    depends_on: list[str] = Field(default_factory=list, description="Node ids or keys that must complete first.")
    approval_required: bool | None = Field(default=None, description="Ask for human approval (null: contract).")


class RunArgs(SagaRef):
    max_parallel: int = Field(default=4, ge=1, le=32, description="Nodes in flight at once.")
    max_steps: int = Field(default=100, ge=1, le=1000, description="Attempts this run may start.")
    wait_seconds: float = Field(default=60, ge=0, le=300, description="How long to wait for the wave to settle.")


class ApproveArgs(SagaRef):
    node_id: str = Field(description="The node id or key waiting for approval.")
    approved: bool = Field(default=True, description="true approves, false rejects.")
    reason: str | None = Field(default=None, max_length=4000, description="Kept with the decision, never audited.")


class RetryArgs(SagaRef):
    node_id: str = Field(description="A FAILED, REJECTED or BLOCKED node's id or key.")
    force: bool = Field(default=False, description="Required when the last attempt's outcome is uncertain.")


class CheckpointArgs(SagaRef):
    name: str = Field(min_length=1, max_length=200)
    data: dict[str, Any] = Field(default_factory=dict)


class TimelineArgs(SagaRef):
    limit: int = Field(default=1000, ge=1, le=5000)


class AuditArgs(SagaRef):
    limit: int = Field(default=500, ge=1, le=5000)
    event_types: list[str] = Field(default_factory=list)


class PolicyStatusArgs(Args):
    tenant_id: str | None = Field(default=None, description="Another tenant's status needs the admin capability.")


class PolicyDecisionsArgs(SagaRef):
    limit: int = Field(default=500, ge=1, le=5000)


class NoArgs(Args):
    pass


class ActionArgs(Args):
    action: str
    version: str | None = None


class ListSagasArgs(Args):
    status: str | None = Field(default=None, description="Only sagas in this status (e.g. ACTIVE).")
    limit: int = Field(default=50, ge=1, le=500)
    cursor: str | None = Field(default=None, description="next_cursor from the previous page.")


# --- handlers (actor first, validated arguments second) -----------------------------------------------------------


def _saga(actor: Principal, saga_id: object) -> dict[str, Any]:
    return shapes.saga_to_dict(selectors.saga_get(actor=actor, saga_id=saga_id))


def begin(actor: Principal, a: BeginArgs) -> dict[str, Any]:
    return shapes.saga_to_dict(coordinator.saga_begin(actor=actor, metadata=a.metadata, preview=a.preview))


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


def approve(actor: Principal, a: ApproveArgs) -> dict[str, Any]:
    node = coordinator.node_approve(
        actor=actor, saga_id=a.saga_id, node_id=a.node_id, approved=a.approved, reason=a.reason
    )
    return shapes.node_to_dict(node)


def retry(actor: Principal, a: RetryArgs) -> dict[str, Any]:
    return shapes.node_to_dict(coordinator.node_retry(actor=actor, saga_id=a.saga_id, node_id=a.node_id, force=a.force))


def checkpoint(actor: Principal, a: CheckpointArgs) -> dict[str, Any]:
    saved = coordinator.saga_checkpoint(actor=actor, saga_id=a.saga_id, name=a.name, data=a.data)
    return {**shapes.checkpoint_to_dict(saved), "saga_id": str(saved.saga_id)}


def commit(actor: Principal, a: SagaRef) -> dict[str, Any]:
    return _saga(actor, coordinator.saga_commit(actor=actor, saga_id=a.saga_id).id)


def rollback(actor: Principal, a: SagaRef) -> dict[str, Any]:
    return _saga(actor, coordinator.saga_rollback(actor=actor, saga_id=a.saga_id).id)


def get(actor: Principal, a: SagaRef) -> dict[str, Any]:
    return _saga(actor, a.saga_id)


def timeline(actor: Principal, a: TimelineArgs) -> dict[str, Any]:
    return selectors.saga_timeline(actor=actor, saga_id=a.saga_id, limit=a.limit)


def audit(actor: Principal, a: AuditArgs) -> dict[str, Any]:
    return selectors.saga_audit_events(actor=actor, saga_id=a.saga_id, limit=a.limit, event_types=a.event_types)


def verify(actor: Principal, a: SagaRef) -> dict[str, Any]:
    return selectors.saga_verify_audit(actor=actor, saga_id=a.saga_id)


def policy_status(actor: Principal, a: PolicyStatusArgs) -> dict[str, Any]:
    return selectors.policy_status(actor=actor, tenant_id=a.tenant_id)


def policy_decisions(actor: Principal, a: PolicyDecisionsArgs) -> dict[str, Any]:
    events = selectors.saga_audit_events(actor=actor, saga_id=a.saga_id, limit=a.limit, event_types=["POLICY_DECISION"])
    return {"saga_id": events["saga_id"], "decisions": events["events"]}


def list_actions(actor: Principal, a: NoArgs) -> dict[str, Any]:
    authorize(actor, "list_actions")
    return {"actions": [action_summary(row) for row in action_list()]}


def get_action(actor: Principal, a: ActionArgs) -> dict[str, Any]:
    authorize(actor, "get_action")
    try:
        return action_detail(action_get(a.action, a.version, include_inactive=a.version is not None))
    except RegistryError as exc:
        raise NotFound(exc.code, exc.message) from exc


def preview_report(actor: Principal, a: SagaRef) -> dict[str, Any]:
    return previews.preview_report(actor=actor, saga_id=a.saga_id)


def promote(actor: Principal, a: SagaRef) -> dict[str, Any]:
    return _saga(actor, coordinator.saga_promote(actor=actor, saga_id=a.saga_id).id)


def list_sagas(actor: Principal, a: ListSagasArgs) -> dict[str, Any]:
    page = selectors.saga_list(actor=actor, status=a.status, limit=a.limit, cursor=a.cursor)
    return {"sagas": [shapes.saga_summary(s) for s in page.sagas], "next_cursor": page.next_cursor}


# --- the table ----------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Tool:
    name: str
    args: type[Args]
    handler: Callable[[Principal, Any], dict[str, Any]]
    operation: str
    description: str
    read_only: bool = False
    destructive: bool = False
    idempotent: bool = False
    open_world: bool = False  # the tool may act on systems outside Semantic Saga


READ = {"read_only": True, "idempotent": True}

TOOLS: dict[str, Tool] = {
    t.name: t
    for t in [
        Tool(
            "begin_saga",
            BeginArgs,
            begin,
            "begin",
            "Start a durable transactional workflow (a saga) in ACTIVE. Returns the saga; keep its id.",
        ),
        Tool(
            "execute_saga_step",
            ExecuteArgs,
            execute,
            "execute",
            "Run one registered action now, journaled before it runs, retried with one idempotency key, and "
            "compensated if the saga rolls back. Prefer plan_saga_step + run_ready_steps for multi-step work.",
            destructive=True,
            open_world=True,
        ),
        Tool(
            "plan_saga_step",
            PlanArgs,
            plan,
            "plan",
            "Add a version-pinned node to the saga's workflow (with depends_on and optional approval). Nothing "
            "runs until run_ready_steps.",
            idempotent=True,
        ),
        Tool(
            "run_ready_steps",
            RunArgs,
            run,
            "run",
            "Run ready nodes in dependency waves (independent ones in parallel) and wait up to wait_seconds for "
            "them to settle. Returns the saga and what is still in flight.",
            destructive=True,
            open_world=True,
        ),
        Tool(
            "approve_saga_step",
            ApproveArgs,
            approve,
            "approve",
            "Approve (approved=true) or reject a node waiting for approval. Rejection pauses the saga in "
            "RECOVERY_REQUIRED.",
        ),
        Tool(
            "retry_saga_step",
            RetryArgs,
            retry,
            "retry",
            "Return a FAILED, REJECTED or BLOCKED node to scheduling (force=true after reconciling an uncertain "
            "outcome). Run run_ready_steps afterwards.",
        ),
        Tool(
            "checkpoint_saga",
            CheckpointArgs,
            checkpoint,
            "checkpoint",
            "Store a named milestone with data (the data is never copied into the audit trail).",
        ),
        Tool(
            "commit_saga",
            SagaRef,
            commit,
            "commit",
            "Finish the saga once every planned node COMPLETED. Committed work is never compensated.",
            idempotent=True,
        ),
        Tool(
            "rollback_saga",
            SagaRef,
            rollback,
            "rollback",
            "Unwind the saga: compensate every completed or uncertain step newest-first. Refused only for "
            "COMMITTED and ROLLED_BACK sagas.",
            destructive=True,
            idempotent=True,
            open_world=True,
        ),
        Tool(
            "trigger_rollback",
            SagaRef,
            rollback,
            "rollback",
            "Same as rollback_saga: start compensation at once after a failure your agent detected.",
            destructive=True,
            idempotent=True,
            open_world=True,
        ),
        Tool(
            "get_saga",
            SagaRef,
            get,
            "get",
            "Read a saga: status, steps, workflow nodes with approvals, checkpoints, errors and recovery state.",
            **READ,
        ),
        Tool(
            "get_saga_timeline",
            TimelineArgs,
            timeline,
            "timeline",
            "A payload-safe timeline: steps, nodes, checkpoint names and audit events, without inputs or "
            "results, plus the audit chain's integrity.",
            **READ,
        ),
        Tool(
            "get_audit_events",
            AuditArgs,
            audit,
            "audit",
            "Read the saga's hash-chained audit events (no inputs, results or secrets), oldest first.",
            **READ,
        ),
        Tool(
            "verify_audit_chain",
            SagaRef,
            verify,
            "verify_audit",
            "Recompute the saga's SHA-256 audit chain; names the first broken sequence if any.",
            **READ,
        ),
        Tool(
            "get_policy_status",
            PolicyStatusArgs,
            policy_status,
            "policy_status",
            "The governance backend, revision, budgets, approval threshold and rule ids for your tenant.",
            **READ,
        ),
        Tool(
            "get_policy_decisions",
            PolicyDecisionsArgs,
            policy_decisions,
            "policy_decisions",
            "The governance decisions recorded for one saga.",
            **READ,
        ),
        Tool(
            "list_actions",
            NoArgs,
            list_actions,
            "list_actions",
            "The active action contracts: ids, versions, schemas, semantics (risk, reversibility), hashes.",
            **READ,
        ),
        Tool(
            "get_action",
            ActionArgs,
            get_action,
            "get_action",
            "One action contract (the active version, or the version given) with its full snapshot and resolved "
            "execution policy.",
            **READ,
        ),
        Tool(
            "list_sagas",
            ListSagasArgs,
            list_sagas,
            "list_sagas",
            "Your tenant's sagas, newest first, optionally by status; pass next_cursor to page.",
            **READ,
        ),
        Tool(
            "get_preview_report",
            SagaRef,
            preview_report,
            "preview_report",
            "For a preview saga (begin_saga preview=true): what it would do to the world, grouped by reversibility "
            "(irreversible, unknown, compensable, reversible, read_only), which steps would wait for approval or "
            "be denied, the budget impact, and the compensation plan a rollback would run. Nothing was executed.",
            **READ,
        ),
        Tool(
            "promote_preview",
            SagaRef,
            promote,
            "promote",
            "Turn a preview into a real saga: a new ACTIVE saga plans the same steps again, with every check run "
            "afresh (nothing is trusted from the dry run). Then run_ready_steps runs it for real.",
        ),
    ]
}
