"""Saga state in the admin: the model pages of sagas, nodes, steps, approvals, checkpoints and A2A tasks.

State is never edited here: every page is read-only and tenant-scoped. The console's screens (approval queue,
recovery, saga detail, policy, saga-level operations) are served by the console site (sagas.console.screens); the
saga list links each saga to its detail screen.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.contrib import admin
from django.urls import reverse
from django.utils.html import format_html

from sagas.console.mixins import ReadOnlyAdminMixin, TenantScopedAdminMixin
from sagas.models import A2ATask, Approval, Checkpoint, Node, Saga, Step

if TYPE_CHECKING:
    _SagaModelAdmin = admin.ModelAdmin[Saga]
else:
    _SagaModelAdmin = admin.ModelAdmin


class ReadOnlyAdmin(TenantScopedAdminMixin, ReadOnlyAdminMixin, admin.ModelAdmin):  # type: ignore[type-arg]
    show_full_result_count = False
    tenant_field = "saga__tenant_id"

    @admin.display(description="saga", ordering="saga")
    def saga_short(self, obj: Node | Step | Checkpoint) -> str:
        """The saga's id, shortened (the whole id on hover): a list of a saga's rows fits a 1280 px screen."""
        return format_html('<span class="mono" title="{}">{}…</span>', obj.saga_id, str(obj.saga_id)[:8])


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


@admin.register(Saga)
class SagaAdmin(TenantScopedAdminMixin, ReadOnlyAdminMixin, _SagaModelAdmin):
    tenant_field = "tenant_id"
    list_display = ("id", "kind_shown", "status", "console_link", "creator_principal_id", "created_at", "updated_at")
    list_filter = ("kind", "status", "preview")
    search_fields = ("id", "creator_principal_id")
    inlines = [NodeInline, StepInline]
    show_full_result_count = False
    ordering = ("-created_at", "-id")

    @admin.display(description="kind", ordering="kind")
    def kind_shown(self, obj: Saga) -> str:
        """A proxy session stands out, with the MCP client that opened it; a plain saga says so quietly."""
        if not obj.is_proxy_session:
            return format_html('<span class="quiet">{}</span>', "saga")
        proxy = obj.metadata.get("proxy") if isinstance(obj.metadata, dict) else None
        client = proxy.get("client") if isinstance(proxy, dict) else None
        name = client.get("name") if isinstance(client, dict) else None
        shown = str(name or "unknown client")
        return format_html(
            '<span class="badge kind-proxy_session">proxy session</span> <span class="quiet" title="{}">{}</span>',
            shown,
            shown if len(shown) <= 40 else shown[:39] + "…",  # an agent names its client: keep the list readable
        )

    @admin.display(description="console")
    def console_link(self, obj: Saga) -> str:
        if obj.is_proxy_session:  # the session's page speaks the ledger's language (calls, classes, undo)
            url = reverse("admin:sagas_saga_session", args=[obj.id])
            return format_html('<a href="{}" id="detail-{}">session</a>', url, obj.id)
        url = reverse("admin:sagas_saga_detail", args=[obj.id])
        return format_html('<a href="{}" id="detail-{}">detail</a>', url, obj.id)


@admin.register(Node)
class NodeAdmin(ReadOnlyAdmin):
    list_display = ("id", "saga_short", "key", "action", "action_version", "status", "attempts", "updated_at")
    list_filter = ("status",)
    list_select_related = ("saga",)
    raw_id_fields = ("saga", "step")


@admin.register(Step)
class StepAdmin(ReadOnlyAdmin):
    list_display = ("id", "saga_short", "sequence", "action", "action_version", "status", "attempts")
    list_filter = ("status",)
    list_select_related = ("saga",)
    raw_id_fields = ("saga", "node")


@admin.register(Approval)
class ApprovalAdmin(ReadOnlyAdmin):
    tenant_field = "node__saga__tenant_id"
    list_display = (
        "id",
        "node_shown",
        "status",
        "requested_by",
        "decided_by",
        "created_at",
        "decided_at",
        "expires_at",
    )
    list_filter = ("status",)
    list_select_related = ("node",)
    raw_id_fields = ("node",)

    @admin.display(description="node", ordering="node")
    def node_shown(self, obj: Approval) -> str:
        return format_html('<span title="{}">{}</span>', obj.node_id, obj.node.key or str(obj.node_id)[:8])


@admin.register(Checkpoint)
class CheckpointAdmin(ReadOnlyAdmin):
    list_display = ("id", "saga_short", "name", "principal_id", "created_at")
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
