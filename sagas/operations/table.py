"""The operation table: one entry per operation, read by every surface (MCP tools, A2A operations, REST routes and
their OpenAPI docs, the console's saga buttons) and by RBAC's callers. Adding an operation is one entry here plus
its arguments model and handler.

MCP tools keep the names, parameters, annotations and descriptions of semantic-saga-mcp (docs/mcp.md), in this
order (tools/list); A2A operations keep the seed's names (docs/a2a.md); REST paths, methods and statuses are those
of docs/rest_api.md. Tests: tests/operations/.
"""

from __future__ import annotations

from typing import Any

from governance.identity.rbac import Capability
from sagas.operations import arguments as args
from sagas.operations import buttons
from sagas.operations import handlers as do
from sagas.operations import schemas as out
from sagas.operations.operation import READ, Button, Hints, Operation, Route
from sagas.operations.proxied import PROXY_OPERATIONS
from sagas.operations.proxy_undo import PROXY_UNDO_OPERATIONS
from sagas.operations.run_control import RUN_CONTROL_OPERATIONS

R, X, D = Capability.READ, Capability.EXECUTE, Capability.DECIDE
SAGA = "sagas/<str:saga_id>/"
NODE = SAGA + "nodes/<str:node_id>/"
# The OpenAPI tags grouping the REST docs.
SAGAS, WORKFLOW, APPROVALS = "sagas", "workflow", "approvals"
EVIDENCE, REGISTRY, GOVERNANCE = "audit", "actions", "governance"
OUTSIDE = Hints(destructive=True, open_world=True)  # acts on systems outside Semantic Saga
UNWIND = Hints(destructive=True, idempotent=True, open_world=True)


TABLE: list[Operation[Any]] = [
    Operation(
        "begin_saga",
        "begin",
        args.BeginArgs,
        do.begin,
        X,
        out.OUT_SAGA,
        "Begin a saga",
        "Start a durable transactional workflow (a saga) in ACTIVE. Returns the saga; keep its id.",
        rest=Route(
            "POST",
            "sagas/",
            "saga-list",
            SAGAS,
            status=201,
            errors=(400, 401, 403, 409, 415, 429),
            note="`metadata` is yours; the server adds `_identity`. The Location header points at the new saga.",
        ),
    ),
    Operation(
        "execute_saga_step",
        "execute",
        args.ExecuteArgs,
        do.execute,
        X,
        out.OUT_STEP,
        "Execute one action now",
        "Run one registered action now, journaled before it runs, retried with one idempotency key, and "
        "compensated if the saga rolls back. Prefer plan_saga_step + run_ready_steps for multi-step work.",
        hints=OUTSIDE,
        rest=Route(
            "POST",
            SAGA + "steps/",
            "saga-steps",
            WORKFLOW,
            status=201,
            errors=(400, 401, 403, 404, 409, 415, 422),
            note="A failed action answers 422 with the saga's reaction.",
        ),
    ),
    Operation(
        "plan_saga_step",
        "plan",
        args.PlanArgs,
        do.plan,
        X,
        out.OUT_NODE,
        "Plan a node",
        "Add a version-pinned node to the saga's workflow (with depends_on and optional approval). Nothing "
        "runs until run_ready_steps.",
        hints=Hints(idempotent=True),
        rest=Route(
            "POST",
            SAGA + "nodes/",
            "saga-nodes",
            WORKFLOW,
            status=201,
            note="Replanning the same key with the same content returns the existing node.",
        ),
    ),
    Operation(
        "run_ready_steps",
        "run",
        args.RunArgs,
        do.run,
        X,
        out.OUT_RUN,
        "Run ready nodes",
        "Run ready nodes in dependency waves (independent ones in parallel) and wait up to wait_seconds for "
        "them to settle. Returns the saga and what is still in flight.",
        hints=OUTSIDE,
        rest=Route("POST", SAGA + "run/", "saga-run", WORKFLOW, errors=(400, 401, 403, 404, 409, 415, 429)),
        console=(buttons.RUN,),
    ),
    Operation(
        "approve_saga_step",
        "approve",
        args.ApproveArgs,
        do.approve,
        D,
        out.OUT_NODE,
        "Approve a node",
        "Approve (approved=true) or reject a node waiting for approval. Rejection pauses the saga in "
        "RECOVERY_REQUIRED.",
        rest=Route(
            "POST",
            NODE + "approve/",
            "node-approve",
            APPROVALS,
            fixed={"approved": True},
            note="This URL approves (POST .../reject/ rejects). The approval binds to the node's pinned contract and "
            "input. Run the saga afterwards.",
        ),
    ),
    Operation(
        "retry_saga_step",
        "retry",
        args.RetryArgs,
        do.retry,
        X,
        out.OUT_NODE,
        "Retry a node",
        "Return a FAILED, REJECTED or BLOCKED node to scheduling (force=true after reconciling an uncertain "
        "outcome). Run run_ready_steps afterwards.",
        rest=Route("POST", NODE + "retry/", "node-retry", WORKFLOW),
    ),
    Operation(
        "checkpoint_saga",
        "checkpoint",
        args.CheckpointArgs,
        do.checkpoint,
        X,
        out.OUT_CHECKPOINT,
        "Store a named checkpoint",
        "Store a named milestone with data (the data is never copied into the audit trail).",
        rest=Route("POST", SAGA + "checkpoints/", "saga-checkpoints", SAGAS, status=201),
    ),
    Operation(
        "commit_saga",
        "commit",
        args.SagaRef,
        do.commit,
        X,
        out.OUT_SAGA,
        "Commit a saga",
        "Finish the saga once every planned node COMPLETED. Committed work is never compensated.",
        hints=Hints(idempotent=True),
        rest=Route("POST", SAGA + "commit/", "saga-commit", SAGAS),
        console=(buttons.COMMIT,),
    ),
    Operation(
        "rollback_saga",
        "rollback",
        args.RollbackArgs,
        do.rollback,
        X,
        out.OUT_SAGA,
        "Roll a saga back",
        "Unwind the saga: compensate every completed or uncertain step newest-first. Refused only for "
        "COMMITTED and ROLLED_BACK sagas.",
        hints=UNWIND,
        rest=Route(
            "POST", SAGA + "rollback/", "saga-rollback", SAGAS, note="Calling it again retries failed compensations."
        ),
        console=(
            buttons.ROLLBACK,
            buttons.RETRY_COMPENSATION,
            buttons.RESUME_ROLLBACK,
        ),
    ),
    Operation(
        "trigger_rollback",
        "rollback",
        args.RollbackArgs,
        do.rollback,
        X,
        out.OUT_SAGA,
        "Roll a saga back",
        "Same as rollback_saga: start compensation at once after a failure your agent detected.",
        hints=UNWIND,
        a2a=False,  # A2A's rollback is rollback_saga
    ),
    Operation(
        "get_saga",
        "get",
        args.SagaRef,
        do.get,
        R,
        out.OUT_SAGA,
        "Read a saga",
        "Read a saga: status, steps, workflow nodes with approvals, checkpoints, errors and recovery state.",
        hints=READ,
        rest=Route("GET", SAGA, "saga-detail", SAGAS),
    ),
    Operation(
        "get_saga_timeline",
        "timeline",
        args.TimelineArgs,
        do.timeline,
        R,
        out.OUT_TIMELINE,
        "A payload-free timeline",
        "A payload-safe timeline: steps, nodes, checkpoint names and audit events, without inputs or "
        "results, plus the audit chain's integrity.",
        hints=READ,
        rest=Route("GET", SAGA + "timeline/", "saga-timeline", EVIDENCE),
    ),
    Operation(
        "get_audit_events",
        "audit",
        args.AuditArgs,
        do.audit,
        R,
        out.OUT_EVENTS,
        "The saga's audit events",
        "Read the saga's hash-chained audit events (no inputs, results or secrets), oldest first.",
        hints=READ,
        rest=Route(
            "GET",
            SAGA + "audit-events/",
            "saga-audit-events",
            EVIDENCE,
            note="Repeat `event_types` to ask for several types.",
        ),
    ),
    Operation(
        "verify_audit_chain",
        "verify_audit",
        args.VerifyArgs,
        do.verify,
        R,
        out.OUT_VERIFY,
        "Verify the audit chain",
        "Recompute the saga's SHA-256 audit chain; names the first broken sequence if any.",
        hints=READ,
        rest=Route("GET", SAGA + "audit-events/verify/", "saga-audit-verify", EVIDENCE),
    ),
    Operation(
        "get_policy_status",
        "policy_status",
        args.PolicyStatusArgs,
        do.policy_status,
        R,
        out.OUT_POLICY_STATUS,
        "Governance status",
        "The governance backend, revision, budgets, approval threshold and rule ids for your tenant.",
        hints=READ,
        rest=Route("GET", "policy/", "policy-status", GOVERNANCE),
    ),
    Operation(
        "get_policy_decisions",
        "policy_decisions",
        args.PolicyDecisionsArgs,
        do.policy_decisions,
        R,
        out.OUT_POLICY_DECISIONS,
        "The saga's policy decisions",
        "The governance decisions recorded for one saga.",
        hints=READ,
        rest=Route("GET", SAGA + "policy-decisions/", "saga-policy-decisions", GOVERNANCE),
    ),
    Operation(
        "list_actions",
        "list_actions",
        args.NoArgs,
        do.list_actions,
        R,
        out.OUT_ACTIONS,
        "Active action contracts",
        "The active action contracts: ids, versions, schemas, semantics (risk, reversibility), hashes.",
        hints=READ,
        rest=Route("GET", "actions/", "action-list", REGISTRY, errors=(400, 401, 403)),
    ),
    Operation(
        "get_action",
        "get_action",
        args.ActionArgs,
        do.get_action,
        R,
        out.OUT_ACTION,
        "One action contract",
        "One action contract (the active version, or the version given) with its full snapshot and resolved "
        "execution policy.",
        hints=READ,
        rest=Route("GET", "actions/<str:action>/", "action-detail", REGISTRY),
    ),
    Operation(
        "list_sagas",
        "list_sagas",
        args.ListSagasArgs,
        do.list_sagas,
        R,
        out.OUT_SAGA_PAGE,
        "List your tenant's sagas, newest first",
        "Your tenant's sagas, newest first, optionally by status; pass next_cursor to page.",
        hints=READ,
        rest=Route("GET", "sagas/", "saga-list", SAGAS, note="Filter by creation time and action too."),
    ),
    Operation(
        "get_preview_report",
        "preview_report",
        args.SagaRef,
        do.preview_report,
        R,
        out.OUT_PREVIEW_REPORT,
        "A preview saga's report",
        "For a preview saga (begin_saga preview=true): what it would do to the world, grouped by reversibility "
        "(irreversible, unknown, compensable, reversible, read_only), which steps would wait for approval or "
        "be denied, the budget impact, and the compensation plan a rollback would run. Nothing was executed. A "
        "proxy session run dry is grouped by class (I, unknown, C, R, read) with the gates its calls would have met.",
        hints=READ,
        rest=Route(
            "GET",
            SAGA + "preview-report/",
            "saga-preview-report",
            SAGAS,
            errors=(400, 401, 403, 404, 409),
            note="A real saga answers 409 NOT_A_PREVIEW.",
        ),
    ),
    Operation(
        "promote_preview",
        "promote",
        args.SagaRef,
        do.promote,
        X,
        out.OUT_SAGA,
        "Promote a preview to a real saga",
        "Turn a preview into a real saga: a new ACTIVE saga plans the same steps again, with every check run "
        "afresh (nothing is trusted from the dry run). Then run_ready_steps runs it for real.",
        rest=Route(
            "POST",
            SAGA + "promote/",
            "saga-promote",
            SAGAS,
            status=201,
            note="The answer is the new saga; the Location header points at it.",
        ),
        console=(buttons.PROMOTE,),
    ),
    # REST only: the approval queue and an explicit rejection (MCP and A2A agents decide with approve's flag).
    Operation(
        "list_approvals",
        "list_approvals",
        args.ListApprovalsArgs,
        do.list_approvals,
        R,
        out.OUT_APPROVAL_PAGE,
        "Nodes waiting for approval",
        "Your tenant's WAITING_APPROVAL nodes, oldest request first, with their input and saga, and what an "
        "approver judges (approval_context): the contract's risk, reversibility and compensation, the rule or "
        "contract that required the approval, and the input digest the approval binds to.",
        hints=READ,
        rest=Route("GET", "approvals/", "approval-list", APPROVALS),
        mcp=False,
        a2a=False,
    ),
    Operation(
        "reject_saga_step",
        "reject",
        args.RejectArgs,
        do.reject,
        D,
        out.OUT_NODE,
        "Reject a node",
        "The node becomes REJECTED, its dependants BLOCKED and the saga RECOVERY_REQUIRED: retry the node to ask "
        "again, or roll the saga back. The reason is kept with the decision, never audited.",
        rest=Route("POST", NODE + "reject/", "node-reject", APPROVALS),
        mcp=False,
        a2a=False,
    ),
]

# Surface-less: a run followed by an MCP task (sagas.operations.run_control).
TABLE += RUN_CONTROL_OPERATIONS
# Surface-less: the MCP proxy's journal of every tools/call (sagas.operations.proxied).
TABLE += PROXY_OPERATIONS
# Surface-less: undo of a proxy session (sagas.operations.proxy_undo; semantic-saga undo).
TABLE += PROXY_UNDO_OPERATIONS

OPERATIONS: dict[str, Operation[Any]] = {op.name: op for op in TABLE}
MCP_TOOLS: dict[str, Operation[Any]] = {op.name: op for op in TABLE if op.mcp}
A2A_OPERATIONS: dict[str, Operation[Any]] = {op.verb: op for op in TABLE if op.a2a}
REST_ROUTES: list[tuple[Operation[Any], Route]] = [(op, op.rest) for op in TABLE if op.rest is not None]
CONSOLE_BUTTONS: dict[str, tuple[Operation[Any], Button]] = {b.slug: (op, b) for op in TABLE for b in op.console}
