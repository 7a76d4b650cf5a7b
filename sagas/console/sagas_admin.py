"""Saga state in the admin, and the operator console built on it.

State is never edited here: the model pages are read-only, and every console action (approve, reject, run ready
nodes, retry, force retry, roll back, retry compensation, commit) calls the same coordinator function the MCP
tool calls, as the signed-in operator's Principal (governance.identity.operators.principal_for_user). Refusals come back
as ServiceError and are shown with their message, which says what to do next. Console URLs, under
/admin/sagas/saga/: approvals/, approvals/decide/, recovery/, policy/, <saga>/detail/, <saga>/verify/,
<saga>/do/<operation>/, <saga>/nodes/<node>/retry/. Each action is a GET confirmation page and a POST that acts,
then redirects with a message.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils.html import format_html
from django.utils.http import url_has_allowed_host_and_scheme

from governance.errors import ServiceError
from governance.identity.operators import principal_for_user
from governance.identity.principal import Principal
from governance.identity.rbac import can
from sagas.console.site import ReadOnlyAdminMixin, TenantScopedAdminMixin
from sagas import coordinator, selectors
from sagas.console import dag, detail, queues
from sagas.errors import NotFound
from sagas.models import A2ATask, Approval, Checkpoint, Node, Saga, Step
from sagas.states import SagaStatus

if TYPE_CHECKING:
    _SagaModelAdmin = admin.ModelAdmin[Saga]
else:
    _SagaModelAdmin = admin.ModelAdmin

View = Callable[..., HttpResponse]


class ReadOnlyAdmin(TenantScopedAdminMixin, ReadOnlyAdminMixin, admin.ModelAdmin):  # type: ignore[type-arg]
    show_full_result_count = False
    tenant_field = "saga__tenant_id"


class StepInline(ReadOnlyAdminMixin, admin.TabularInline):  # type: ignore[type-arg]
    model = Step
    fields = ("sequence", "action", "action_version", "status", "attempts", "compensation_attempts")
    readonly_fields = fields
    extra = 0
    can_delete = False
    show_change_link = True


class NodeInline(StepInline):
    model = Node  # type: ignore[assignment]
    fields = ("position", "key", "action", "action_version", "status", "attempts")
    readonly_fields = fields
    fk_name = "saga"


# --- saga-level operations: what each confirmation page says, and the coordinator call it makes -------------


def _run(actor: Principal, saga_id: uuid.UUID) -> str:
    # wait_seconds=0: the page returns at once and the executor (Celery or the embedded pool) runs the nodes.
    report = coordinator.saga_run_ready(actor=actor, saga_id=saga_id, wait_seconds=0)
    counts = ", ".join(f"{n} {status}" for status, n in sorted(report.node_counts.items())) or "no nodes"
    return f"Run requested for saga {saga_id} ({counts}). The executor runs the ready nodes; refresh to follow them."


def _commit(actor: Principal, saga_id: uuid.UUID) -> str:
    saga = coordinator.saga_commit(actor=actor, saga_id=saga_id)
    return f"Saga {saga.id} is {saga.status}."


def _rollback(actor: Principal, saga_id: uuid.UUID) -> str:
    # wait_seconds=0: never hold the page for attempts in flight; the rollback starts when they finish.
    saga = coordinator.saga_rollback(actor=actor, saga_id=saga_id, wait_seconds=0)
    outcome = {
        SagaStatus.ROLLED_BACK: "rolled back: every completed step was compensated",
        SagaStatus.ROLLBACK_FAILED: "ROLLBACK_FAILED: some compensations failed; see the recovery screen",
        SagaStatus.FAILED: "waiting for attempts in flight to finish; the rollback starts then",
        SagaStatus.ROLLING_BACK: "rolling back (another runner holds the rollback)",
    }.get(SagaStatus(saga.status), saga.status)
    return f"Saga {saga.id}: {outcome}."


def _promote(actor: Principal, saga_id: uuid.UUID) -> str:
    saga = coordinator.saga_promote(actor=actor, saga_id=saga_id)
    planned = saga.nodes.count()
    return (
        f"Preview {saga_id} promoted: saga {saga.id} is a real saga with {planned} node(s) planned again, every "
        "check made afresh. Open it from the saga list and run its ready nodes."
    )


@dataclass(frozen=True)
class SagaOperation:
    title: str
    explanation: str
    button: str
    perform: Callable[[Principal, uuid.UUID], str]
    danger: bool = False


SAGA_OPERATIONS: dict[str, SagaOperation] = {
    "run": SagaOperation(
        "Run ready nodes",
        "Starts a run: READY nodes are executed by the workers in dependency waves, and nodes that become ready "
        "follow. Nodes waiting for approval stay waiting.",
        "Run ready nodes",
        _run,
    ),
    "commit": SagaOperation(
        "Commit saga",
        "Commits the saga: its work is final and it can no longer be rolled back. Only an ACTIVE saga whose nodes "
        "all COMPLETED commits.",
        "Commit",
        _commit,
    ),
    "rollback": SagaOperation(
        "Roll back saga",
        "Stops new work and compensates every completed step, newest first, with the contract each step ran with. "
        "Nodes that never started are blocked. This cannot be undone.",
        "Roll back",
        _rollback,
        danger=True,
    ),
    "retry_compensation": SagaOperation(
        "Retry compensation",
        "Retries the compensations that failed (the others are never compensated twice). Fix the downstream system "
        "first; if a compensation fails again the saga returns to ROLLBACK_FAILED.",
        "Retry compensation",
        _rollback,
        danger=True,
    ),
    "promote": SagaOperation(
        "Promote preview",
        "Creates a new, real saga that plans this preview's steps again, with the same keys, dependencies and "
        "inputs. Every check runs afresh (registry, schema, policy, kill switch, approvals); nothing is trusted from "
        "the dry run. The preview itself is unchanged.",
        "Promote to a real saga",
        _promote,
    ),
    "resume_rollback": SagaOperation(
        "Resume rollback",
        "Starts the pending or interrupted rollback now instead of waiting for the recovery sweeper.",
        "Resume rollback",
        _rollback,
    ),
}


@admin.register(Saga)
class SagaAdmin(TenantScopedAdminMixin, ReadOnlyAdminMixin, _SagaModelAdmin):
    tenant_field = "tenant_id"
    list_display = ("id", "status", "console_link", "creator_principal_id", "created_at", "updated_at")
    list_filter = ("status",)
    search_fields = ("id", "creator_principal_id")
    inlines = [NodeInline, StepInline]
    show_full_result_count = False
    ordering = ("-created_at", "-id")

    @admin.display(description="console")
    def console_link(self, obj: Saga) -> str:
        url = reverse("admin:sagas_saga_detail", args=[obj.id])
        return format_html('<a href="{}" id="detail-{}">detail</a>', url, obj.id)

    def get_urls(self) -> list[URLPattern]:
        view = self.admin_site.admin_view
        console = [
            path("approvals/", view(self.approvals_view), name="sagas_saga_approvals"),
            path("approvals/decide/", view(self.decide_view), name="sagas_saga_decide"),
            path("recovery/", view(self.recovery_view), name="sagas_saga_recovery"),
            path("policy/", view(self.policy_view), name="sagas_saga_policy"),
            path("<uuid:saga_id>/detail/", view(self.detail_view), name="sagas_saga_detail"),
            path("<uuid:saga_id>/verify/", view(self.verify_view), name="sagas_saga_verify"),
            path("<uuid:saga_id>/preview/", view(self.preview_view), name="sagas_saga_preview"),
            path("<uuid:saga_id>/do/<str:operation>/", view(self.operation_view), name="sagas_saga_do"),
            path("<uuid:saga_id>/nodes/<uuid:node_id>/retry/", view(self.retry_view), name="sagas_saga_retry"),
        ]
        # Ours first: the default `<path:object_id>/` pattern would swallow them.
        return console + super().get_urls()

    # --- plumbing shared by the console views ---------------------------------------------------------------

    def _principal(self, request: HttpRequest) -> Principal:
        principal = principal_for_user(request.user)
        if principal is None or not self.has_view_permission(request):
            raise PermissionDenied("This account has no operator profile (tenant and role) or no view permission.")
        return principal

    def _context(self, request: HttpRequest, principal: Principal, title: str, **extra: Any) -> dict[str, Any]:
        return {
            **self.admin_site.each_context(request),
            "opts": self.opts,
            "title": title,
            "principal": principal,
            # Buttons follow the role; the coordinator checks again, so a forged POST is refused all the same.
            "can_execute": can(principal, "approve"),
            **extra,
        }

    @staticmethod
    def _back(request: HttpRequest, default: str) -> HttpResponseRedirect:
        target = request.POST.get("next") or request.GET.get("next") or ""
        safe = url_has_allowed_host_and_scheme(target, {request.get_host()}, require_https=request.is_secure())
        return HttpResponseRedirect(target if safe else default)

    @staticmethod
    def _found(read: Callable[[], Any]) -> Any:
        """Another tenant's saga or node answers 404, exactly like a missing one."""
        try:
            return read()
        except NotFound as missing:
            raise Http404(missing.message) from missing

    @staticmethod
    def _act(request: HttpRequest, perform: Callable[[], str]) -> bool:
        try:
            messages.success(request, perform())
        except ServiceError as error:
            messages.error(request, error.message)
            return False
        return True

    # --- approval queue ---------------------------------------------------------------------------------------

    def approvals_view(self, request: HttpRequest) -> HttpResponse:
        principal = self._principal(request)
        items = queues.approval_queue(actor=principal)
        context = self._context(request, principal, "Approval queue", items=items, limit=queues.QUEUE_LIMIT)
        return TemplateResponse(request, "admin/sagas/saga/approvals.html", context)

    def decide_view(self, request: HttpRequest) -> HttpResponse:
        principal = self._principal(request)
        data = request.POST if request.method == "POST" else request.GET
        decision = data.get("decision")
        if decision not in ("approve", "reject"):
            raise Http404("decision must be approve or reject")
        nodes = self._found(lambda: queues.tenant_nodes(actor=principal, node_ids=data.getlist("node")))
        queue_url = reverse("admin:sagas_saga_approvals")
        if request.method != "POST":
            title = f"{decision.capitalize()} {len(nodes)} node(s)"
            rows = queues.decisions(nodes)
            context = self._context(request, principal, title, rows=rows, decision=decision, next=data.get("next"))
            return TemplateResponse(request, "admin/sagas/saga/decide.html", context)
        decided = self._decide(request, principal, nodes, approved=decision == "approve")
        if decided and decision == "approve" and request.POST.get("run_ready"):
            for saga_id in dict.fromkeys(n.saga_id for n in decided):
                self._act(request, partial(_run, principal, saga_id))
        return self._back(request, queue_url)

    def _decide(self, request: HttpRequest, principal: Principal, nodes: list[Node], *, approved: bool) -> list[Node]:
        reason = request.POST.get("reason", "").strip() or None
        decided = []
        for node in nodes:
            try:
                coordinator.node_approve(
                    actor=principal, saga_id=node.saga_id, node_id=node.id, approved=approved, reason=reason
                )
            except ServiceError as error:
                messages.error(request, f"Node {node.key or node.id}: {error.message}")
            else:
                decided.append(node)
        if decided:
            verb = "Approved" if approved else "Rejected"
            names = ", ".join(n.key or str(n.id) for n in decided)
            messages.success(request, f"{verb} {len(decided)} node(s): {names}.")
        return decided

    # --- recovery -------------------------------------------------------------------------------------------------

    def recovery_view(self, request: HttpRequest) -> HttpResponse:
        principal = self._principal(request)
        cases = queues.recovery_cases(actor=principal)
        context = self._context(request, principal, "Recovery", cases=cases, limit=queues.QUEUE_LIMIT)
        return TemplateResponse(request, "admin/sagas/saga/recovery.html", context)

    def retry_view(self, request: HttpRequest, saga_id: uuid.UUID, node_id: uuid.UUID) -> HttpResponse:
        principal = self._principal(request)
        node = self._found(lambda: queues.tenant_nodes(actor=principal, node_ids=[str(node_id)]))[0]
        if node.saga_id != saga_id:
            raise Http404("Node not found in this saga.")
        detail_url = reverse("admin:sagas_saga_detail", args=[saga_id])
        if request.method != "POST":
            title = f"{'Force retry' if node.uncertain_outcome else 'Retry'} node {node.key or node.id}"
            context = self._context(request, principal, title, node=node, next=request.GET.get("next"))
            return TemplateResponse(request, "admin/sagas/saga/retry.html", context)
        force = request.POST.get("reconciled") == "on"
        retried = self._act(
            request,
            lambda: (
                f"Node {node.key or node.id} is "
                f"{coordinator.node_retry(actor=principal, saga_id=saga_id, node_id=node_id, force=force).status}."
            ),
        )
        if retried and request.POST.get("run_ready"):
            self._act(request, lambda: _run(principal, saga_id))
        return self._back(request, detail_url)

    # --- saga detail and saga-level operations -----------------------------------------------------------------

    def detail_view(self, request: HttpRequest, saga_id: uuid.UUID) -> HttpResponse:
        principal = self._principal(request)
        page = self._found(lambda: detail.saga_detail(actor=principal, saga_id=saga_id))
        context = self._context(request, principal, f"Saga {saga_id}", detail=page, legend=dag.legend())
        return TemplateResponse(request, "admin/sagas/saga/detail.html", context)

    def preview_view(self, request: HttpRequest, saga_id: uuid.UUID) -> HttpResponse:
        """A preview saga's report: would-be effects by reversibility, gates, budget, compensation plan."""
        principal = self._principal(request)
        saga = self._found(lambda: selectors.saga_get(actor=principal, saga_id=saga_id))
        try:
            report = selectors.preview_report(actor=principal, saga_id=saga.id)
        except ServiceError as error:
            messages.error(request, error.message)
            return HttpResponseRedirect(reverse("admin:sagas_saga_detail", args=[saga.id]))
        context = self._context(request, principal, f"Preview report of saga {saga.id}", saga=saga, report=report)
        return TemplateResponse(request, "admin/sagas/saga/preview.html", context)

    def verify_view(self, request: HttpRequest, saga_id: uuid.UUID) -> HttpResponse:
        principal = self._principal(request)
        detail_url = reverse("admin:sagas_saga_detail", args=[saga_id])
        if request.method != "POST":
            return HttpResponseRedirect(detail_url)
        result = self._found(lambda: selectors.saga_verify_audit(actor=principal, saga_id=saga_id))
        if result["valid"]:
            messages.success(
                request,
                f"Audit chain verified: {result['events_checked']} event(s), head hash {result['head_hash']}.",
            )
        else:
            messages.error(
                request,
                f"Audit chain BROKEN at sequence {result['failed_sequence']}: {result.get('reason', '')}. "
                "Treat this saga's evidence as tampered with and compare it with your exported manifests.",
            )
        return HttpResponseRedirect(detail_url)

    def operation_view(self, request: HttpRequest, saga_id: uuid.UUID, operation: str) -> HttpResponse:
        principal = self._principal(request)
        op = SAGA_OPERATIONS.get(operation)
        if op is None:
            raise Http404(f"Unknown operation {operation!r}.")
        saga = self._found(lambda: selectors.saga_get(actor=principal, saga_id=saga_id))
        if request.method == "POST":
            self._act(request, lambda: op.perform(principal, saga.id))
            return self._back(request, reverse("admin:sagas_saga_detail", args=[saga.id]))
        context = self._context(
            request, principal, op.title, saga=saga, operation=operation, op=op, next=request.GET.get("next")
        )
        return TemplateResponse(request, "admin/sagas/saga/operation.html", context)

    # --- governance --------------------------------------------------------------------------------------------

    def policy_view(self, request: HttpRequest) -> HttpResponse:
        principal = self._principal(request)
        try:
            page = detail.policy_page(actor=principal)
        except ServiceError as error:
            messages.error(request, error.message)
            page = {"status": None, "decisions": []}
        context = self._context(request, principal, "Policy status and decisions", **page)
        return TemplateResponse(request, "admin/sagas/saga/policy.html", context)


@admin.register(Node)
class NodeAdmin(ReadOnlyAdmin):
    list_display = ("id", "saga", "key", "action", "action_version", "status", "attempts", "updated_at")
    list_filter = ("status",)
    list_select_related = ("saga",)
    raw_id_fields = ("saga", "step")


@admin.register(Step)
class StepAdmin(ReadOnlyAdmin):
    list_display = ("id", "saga", "sequence", "action", "action_version", "status", "attempts")
    list_filter = ("status",)
    list_select_related = ("saga",)
    raw_id_fields = ("saga", "node")


@admin.register(Approval)
class ApprovalAdmin(ReadOnlyAdmin):
    tenant_field = "node__saga__tenant_id"
    list_display = ("id", "node", "status", "requested_by", "decided_by", "created_at", "decided_at", "expires_at")
    list_filter = ("status",)
    list_select_related = ("node",)
    raw_id_fields = ("node",)


@admin.register(Checkpoint)
class CheckpointAdmin(ReadOnlyAdmin):
    list_display = ("id", "saga", "name", "principal_id", "created_at")
    raw_id_fields = ("saga",)
    # Checkpoint data may hold anything the agent stored; the admin shows names, like the timeline.
    exclude = ("data",)


@admin.register(A2ATask)
class A2ATaskAdmin(ReadOnlyAdmin):
    """A2A protocol tasks (the peers' handles on their commands); find a saga's tasks by searching its id."""

    tenant_field = "tenant_id"
    list_display = ("id", "operation", "state", "saga_id", "context_id", "updated_at")
    list_filter = ("state", "operation")
    search_fields = ("=id", "=saga_id", "=context_id")
    ordering = ("-updated_at", "-id")
