"""REST views: parse and validate, check the RBAC operation, call the MCP tool's handler (or a selector), answer.

No view writes to the ORM or holds workflow logic: each is a translation into the same handler MCP and A2A call,
so a REST client can do exactly what an MCP client with the same token can, no more.
"""

from __future__ import annotations

from typing import Any

from django.urls import Resolver404, resolve, reverse
from drf_spectacular.utils import extend_schema
from rest_framework import exceptions, status
from rest_framework.authentication import BaseAuthentication
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from sagas import selectors, shapes
from sagas.api import selectors as api_selectors
from sagas.api.authentication import request_principal
from sagas.api.inputs import body_args, query_args, run_tool
from sagas.api.serializers import (
    ACTION_ID,
    NODE_ID,
    READ_ERRORS,
    SAGA_ID,
    WRITE_ERRORS,
    ApprovalsQuery,
    ListSagasQuery,
    RejectArgs,
    query_parameters,
    request_body,
    responses,
)
from sagas.protocols.mcp_tools import (
    ActionArgs,
    ApproveArgs,
    AuditArgs,
    BeginArgs,
    CheckpointArgs,
    ExecuteArgs,
    NoArgs,
    PlanArgs,
    PolicyDecisionsArgs,
    PolicyStatusArgs,
    RetryArgs,
    RunArgs,
    SagaRef,
    TimelineArgs,
)

SAGAS, WORKFLOW, APPROVALS, EVIDENCE, REGISTRY, GOVERNANCE = (
    "sagas",
    "workflow",
    "approvals",
    "audit",
    "actions",
    "governance",
)
NODE_PATH = ("saga_id", "node_id")


class SagaApiView(APIView):
    # Authentication, permission, parsers, renderers and the error handler come from settings.REST_FRAMEWORK
    # (no docstring: drf-spectacular would publish it as every operation's description).
    pass


# --- sagas --------------------------------------------------------------------------------------------------------


class SagaCollection(SagaApiView):
    @extend_schema(
        operation_id="list_sagas",
        tags=[SAGAS],
        summary="List your tenant's sagas, newest first",
        description="Filter by status, creation time and action; page with `limit` and `next_cursor`.",
        parameters=query_parameters(ListSagasQuery),
        responses=responses(200, "SagaPage", READ_ERRORS),
    )
    def get(self, request: Request) -> Response:
        q = query_args(request, ListSagasQuery)
        page = selectors.saga_list(
            actor=request_principal(request),
            status=q.status,
            limit=q.limit,
            cursor=q.cursor,
            created_after=q.created_after,
            created_before=q.created_before,
            action=q.action,
        )
        return Response({"sagas": [shapes.saga_summary(s) for s in page.sagas], "next_cursor": page.next_cursor})

    @extend_schema(
        operation_id="begin_saga",
        tags=[SAGAS],
        summary="Begin a saga",
        description="Starts a saga in ACTIVE. `metadata` is yours; the server adds `_identity`.",
        request=request_body(BeginArgs),
        responses=responses(201, "Saga", (400, 401, 403, 409, 415)),
    )
    def post(self, request: Request) -> Response:
        saga = run_tool(request, "begin_saga", body_args(request, BeginArgs))
        location = reverse("sagas_api:saga-detail", kwargs={"saga_id": saga["id"]})
        return Response(saga, status=status.HTTP_201_CREATED, headers={"Location": location})


class SagaDetail(SagaApiView):
    @extend_schema(
        operation_id="get_saga",
        tags=[SAGAS],
        summary="Read a saga",
        description="Status, steps, workflow nodes with approvals, checkpoints, errors.",
        parameters=[SAGA_ID],
        responses=responses(200, "Saga", READ_ERRORS),
    )
    def get(self, request: Request, saga_id: str) -> Response:
        return Response(run_tool(request, "get_saga", query_args(request, SagaRef, saga_id=saga_id)))


class SagaCommit(SagaApiView):
    @extend_schema(
        operation_id="commit_saga",
        tags=[SAGAS],
        summary="Commit a saga",
        description="Finishes the saga once every planned node COMPLETED. Committed work is never compensated.",
        parameters=[SAGA_ID],
        request=request_body(SagaRef),
        responses=responses(200, "Saga", WRITE_ERRORS),
    )
    def post(self, request: Request, saga_id: str) -> Response:
        return Response(run_tool(request, "commit_saga", body_args(request, SagaRef, saga_id=saga_id)))


class SagaRollback(SagaApiView):
    @extend_schema(
        operation_id="rollback_saga",
        tags=[SAGAS],
        summary="Roll a saga back",
        description="Compensates every completed or uncertain step, newest first. Refused for COMMITTED and "
        "ROLLED_BACK sagas; calling it again retries failed compensations.",
        parameters=[SAGA_ID],
        request=request_body(SagaRef),
        responses=responses(200, "Saga", WRITE_ERRORS),
    )
    def post(self, request: Request, saga_id: str) -> Response:
        return Response(run_tool(request, "rollback_saga", body_args(request, SagaRef, saga_id=saga_id)))


class SagaPreviewReport(SagaApiView):
    @extend_schema(
        operation_id="get_preview_report",
        tags=[SAGAS],
        summary="A preview saga's report",
        description="What a preview saga (begun with preview=true) would do to the world: its dry steps grouped by "
        "reversibility, which would wait for approval or be denied, the budget impact and the compensation plan. "
        "Nothing was executed. A real saga answers 409 NOT_A_PREVIEW.",
        parameters=[SAGA_ID],
        responses=responses(200, "PreviewReport", (*READ_ERRORS, 409)),
    )
    def get(self, request: Request, saga_id: str) -> Response:
        return Response(run_tool(request, "get_preview_report", query_args(request, SagaRef, saga_id=saga_id)))


class SagaPromote(SagaApiView):
    @extend_schema(
        operation_id="promote_preview",
        tags=[SAGAS],
        summary="Promote a preview to a real saga",
        description="Creates a new ACTIVE saga that plans the preview's steps again with every check made afresh; "
        "answers the new saga. Run its ready steps to run it for real.",
        parameters=[SAGA_ID],
        request=request_body(SagaRef),
        responses=responses(201, "Saga", WRITE_ERRORS),
    )
    def post(self, request: Request, saga_id: str) -> Response:
        saga = run_tool(request, "promote_preview", body_args(request, SagaRef, saga_id=saga_id))
        location = reverse("sagas_api:saga-detail", kwargs={"saga_id": saga["id"]})
        return Response(saga, status=status.HTTP_201_CREATED, headers={"Location": location})


class SagaCheckpoints(SagaApiView):
    @extend_schema(
        operation_id="checkpoint_saga",
        tags=[SAGAS],
        summary="Store a named checkpoint",
        description="The data is kept with the saga and never copied into the audit trail.",
        parameters=[SAGA_ID],
        request=request_body(CheckpointArgs),
        responses=responses(201, "CheckpointResult", WRITE_ERRORS),
    )
    def post(self, request: Request, saga_id: str) -> Response:
        result = run_tool(request, "checkpoint_saga", body_args(request, CheckpointArgs, saga_id=saga_id))
        return Response(result, status=status.HTTP_201_CREATED)


# --- workflow -----------------------------------------------------------------------------------------------------


class SagaSteps(SagaApiView):
    @extend_schema(
        operation_id="execute_saga_step",
        tags=[WORKFLOW],
        summary="Execute one action now",
        description="Journaled before it runs, retried with one idempotency key, compensated if the saga rolls "
        "back. A failed action answers 422 with the saga's reaction. Prefer planned nodes for multi-step work.",
        parameters=[SAGA_ID],
        request=request_body(ExecuteArgs),
        responses=responses(201, "StepResult", (*WRITE_ERRORS, 422)),
    )
    def post(self, request: Request, saga_id: str) -> Response:
        result = run_tool(request, "execute_saga_step", body_args(request, ExecuteArgs, saga_id=saga_id))
        return Response(result, status=status.HTTP_201_CREATED)


class SagaNodes(SagaApiView):
    @extend_schema(
        operation_id="plan_saga_step",
        tags=[WORKFLOW],
        summary="Plan a node",
        description="Adds a version-pinned node (depends_on, optional approval). Nothing runs until "
        "POST .../run/. Replanning the same key with the same content returns the existing node.",
        parameters=[SAGA_ID],
        request=request_body(PlanArgs),
        responses=responses(201, "Node", WRITE_ERRORS),
    )
    def post(self, request: Request, saga_id: str) -> Response:
        result = run_tool(request, "plan_saga_step", body_args(request, PlanArgs, saga_id=saga_id))
        return Response(result, status=status.HTTP_201_CREATED)


class SagaRun(SagaApiView):
    @extend_schema(
        operation_id="run_ready_steps",
        tags=[WORKFLOW],
        summary="Run ready nodes",
        description="Runs ready nodes in dependency waves (independent ones in parallel) and waits up to "
        "wait_seconds for them to settle. Returns the saga and what is still in flight.",
        parameters=[SAGA_ID],
        request=request_body(RunArgs),
        responses=responses(200, "RunResult", WRITE_ERRORS),
    )
    def post(self, request: Request, saga_id: str) -> Response:
        return Response(run_tool(request, "run_ready_steps", body_args(request, RunArgs, saga_id=saga_id)))


class NodeRetry(SagaApiView):
    @extend_schema(
        operation_id="retry_saga_step",
        tags=[WORKFLOW],
        summary="Retry a node",
        description="Returns a FAILED, REJECTED or BLOCKED node to scheduling (force=true after reconciling an "
        "uncertain outcome). Run the saga afterwards.",
        parameters=[SAGA_ID, NODE_ID],
        request=request_body(RetryArgs, exclude=NODE_PATH),
        responses=responses(200, "Node", WRITE_ERRORS),
    )
    def post(self, request: Request, saga_id: str, node_id: str) -> Response:
        args = body_args(request, RetryArgs, saga_id=saga_id, node_id=node_id)
        return Response(run_tool(request, "retry_saga_step", args))


# --- approvals ----------------------------------------------------------------------------------------------------


class ApprovalQueue(SagaApiView):
    @extend_schema(
        operation_id="list_approvals",
        tags=[APPROVALS],
        summary="Nodes waiting for approval",
        description="Your tenant's WAITING_APPROVAL nodes, oldest request first, with their input and saga, and "
        "what an approver judges (approval_context): the contract's risk, reversibility and compensation, the rule "
        "or contract that required the approval, and the input digest the approval binds to.",
        parameters=query_parameters(ApprovalsQuery),
        responses=responses(200, "ApprovalPage", READ_ERRORS),
    )
    def get(self, request: Request) -> Response:
        q = query_args(request, ApprovalsQuery)
        page = api_selectors.approvals_pending(actor=request_principal(request), limit=q.limit, cursor=q.cursor)
        return Response({"approvals": page.approvals, "next_cursor": page.next_cursor})


class NodeApprove(SagaApiView):
    @extend_schema(
        operation_id="approve_saga_step",
        tags=[APPROVALS],
        summary="Approve a node",
        description="The approval binds to the node's pinned contract and input. Run the saga afterwards.",
        parameters=[SAGA_ID, NODE_ID],
        request=request_body(ApproveArgs, exclude=(*NODE_PATH, "approved")),
        responses=responses(200, "Node", WRITE_ERRORS),
    )
    def post(self, request: Request, saga_id: str, node_id: str) -> Response:
        args = body_args(request, ApproveArgs, fixed={"approved": True}, saga_id=saga_id, node_id=node_id)
        return Response(run_tool(request, "approve_saga_step", args))


class NodeReject(SagaApiView):
    @extend_schema(
        operation_id="reject_saga_step",
        tags=[APPROVALS],
        summary="Reject a node",
        description="The node becomes REJECTED, its dependants BLOCKED and the saga RECOVERY_REQUIRED: retry the "
        "node to ask again, or roll the saga back. The reason is kept with the decision, never audited.",
        parameters=[SAGA_ID, NODE_ID],
        request=request_body(RejectArgs, exclude=(*NODE_PATH, "approved")),
        responses=responses(200, "Node", WRITE_ERRORS),
    )
    def post(self, request: Request, saga_id: str, node_id: str) -> Response:
        args = body_args(request, RejectArgs, fixed={"approved": False}, saga_id=saga_id, node_id=node_id)
        return Response(run_tool(request, "approve_saga_step", args))


# --- audit evidence -----------------------------------------------------------------------------------------------


class SagaTimeline(SagaApiView):
    @extend_schema(
        operation_id="get_saga_timeline",
        tags=[EVIDENCE],
        summary="A payload-free timeline",
        description="Steps, nodes, checkpoint names and audit events without inputs or results, plus the audit "
        "chain's integrity.",
        parameters=[SAGA_ID, *query_parameters(TimelineArgs)],
        responses=responses(200, "Timeline", READ_ERRORS),
    )
    def get(self, request: Request, saga_id: str) -> Response:
        return Response(run_tool(request, "get_saga_timeline", query_args(request, TimelineArgs, saga_id=saga_id)))


class SagaAuditEvents(SagaApiView):
    @extend_schema(
        operation_id="get_audit_events",
        tags=[EVIDENCE],
        summary="The saga's audit events",
        description="Hash-chained, oldest first, without inputs, results or secrets. Repeat `event_types` to ask "
        "for several types.",
        parameters=[SAGA_ID, *query_parameters(AuditArgs)],
        responses=responses(200, "AuditEvents", READ_ERRORS),
    )
    def get(self, request: Request, saga_id: str) -> Response:
        return Response(run_tool(request, "get_audit_events", query_args(request, AuditArgs, saga_id=saga_id)))


class SagaAuditVerification(SagaApiView):
    @extend_schema(
        operation_id="verify_audit_chain",
        tags=[EVIDENCE],
        summary="Verify the audit chain",
        description="Recomputes the saga's SHA-256 chain; names the first broken sequence if any.",
        parameters=[SAGA_ID],
        responses=responses(200, "AuditVerification", READ_ERRORS),
    )
    def get(self, request: Request, saga_id: str) -> Response:
        return Response(run_tool(request, "verify_audit_chain", query_args(request, SagaRef, saga_id=saga_id)))


# --- governance and the registry ----------------------------------------------------------------------------------


class SagaPolicyDecisions(SagaApiView):
    @extend_schema(
        operation_id="get_policy_decisions",
        tags=[GOVERNANCE],
        summary="The saga's policy decisions",
        parameters=[SAGA_ID, *query_parameters(PolicyDecisionsArgs)],
        responses=responses(200, "PolicyDecisions", READ_ERRORS),
    )
    def get(self, request: Request, saga_id: str) -> Response:
        args = query_args(request, PolicyDecisionsArgs, saga_id=saga_id)
        return Response(run_tool(request, "get_policy_decisions", args))


class PolicyStatus(SagaApiView):
    @extend_schema(
        operation_id="get_policy_status",
        tags=[GOVERNANCE],
        summary="Governance status",
        description="Backend, revision, budgets, approval threshold and rule ids; another tenant's needs admin.",
        parameters=query_parameters(PolicyStatusArgs),
        responses=responses(200, "PolicyStatus", READ_ERRORS),
    )
    def get(self, request: Request) -> Response:
        return Response(run_tool(request, "get_policy_status", query_args(request, PolicyStatusArgs)))


class ActionCollection(SagaApiView):
    @extend_schema(
        operation_id="list_actions",
        tags=[REGISTRY],
        summary="Active action contracts",
        responses=responses(200, "ActionList", (400, 401, 403)),
    )
    def get(self, request: Request) -> Response:
        return Response(run_tool(request, "list_actions", query_args(request, NoArgs)))


class ActionDetail(SagaApiView):
    @extend_schema(
        operation_id="get_action",
        tags=[REGISTRY],
        summary="One action contract",
        description="The active version, or `version`; with the full snapshot and resolved execution policy.",
        parameters=[ACTION_ID, *query_parameters(ActionArgs, exclude=("action",))],
        responses=responses(200, "Action", READ_ERRORS),
    )
    def get(self, request: Request, action: str) -> Response:
        return Response(run_tool(request, "get_action", query_args(request, ActionArgs, action=action)))


@extend_schema(exclude=True)
class UnknownEndpoint(APIView):
    """Any other path under /api/v1/: a JSON 404 pointing to the docs, whatever the method."""

    authentication_classes: list[type[BaseAuthentication]] = []
    permission_classes = [AllowAny]

    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        hint = ""
        if not request.path.endswith("/"):
            try:
                match = resolve(request.path + "/")
            except Resolver404:
                pass
            else:
                hint = f" (paths end with a slash: {request.path}/)" if match.url_name != "unknown" else ""
        raise exceptions.NotFound(f"There is no endpoint {request.path}{hint}")

    post = put = patch = delete = options = get
