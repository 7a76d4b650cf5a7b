"""Read-only admin views of saga state for now; the operator console (approval queue, recovery) builds on these.

State is never edited here: every change goes through sagas.coordinator.
"""

from __future__ import annotations

from django.contrib import admin

from saga_project.admin_mixins import ReadOnlyAdminMixin, TenantScopedAdminMixin
from sagas.models import A2ATask, Approval, Checkpoint, Node, Saga, Step


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


@admin.register(Saga)
class SagaAdmin(ReadOnlyAdmin):
    tenant_field = "tenant_id"
    list_display = ("id", "tenant_id", "status", "creator_principal_id", "created_at", "updated_at")
    list_filter = ("status", "tenant_id")
    search_fields = ("id", "creator_principal_id")
    inlines = [NodeInline, StepInline]
    show_full_result_count = False


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
    list_display = ("id", "node", "status", "requested_by", "decided_by", "created_at", "decided_at")
    list_filter = ("status",)
    raw_id_fields = ("node",)


@admin.register(Checkpoint)
class CheckpointAdmin(ReadOnlyAdmin):
    list_display = ("id", "saga", "name", "principal_id", "created_at")
    raw_id_fields = ("saga",)


@admin.register(A2ATask)
class A2ATaskAdmin(ReadOnlyAdmin):
    """A2A protocol tasks (the peers' handles on their commands); find a saga's tasks by searching its id."""

    tenant_field = "tenant_id"
    list_display = ("id", "operation", "state", "saga_id", "context_id", "updated_at")
    list_filter = ("state", "operation")
    search_fields = ("=id", "=saga_id", "=context_id")
    ordering = ("-updated_at", "-id")
