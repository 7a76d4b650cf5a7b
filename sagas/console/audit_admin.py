"""Audit evidence is read-only everywhere: add, change and delete are denied.

Events are listed for the operator's tenant only (the denormalized `tenant_id` column), plus the deployment's
control-plane chain (registry and policy changes, which apply to every tenant and are no one tenant's), searched
on the other denormalized columns, and filtered by event type, by chain kind (saga or control plane) and by
chain id (a saga's id, or a control-plane chain's). The audit app itself holds no admin module: it stays below the
others and never imports the console.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

from django.contrib import admin
from django.db.models import Q, QuerySet
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html

from audit import control_plane, seed_names
from audit.models import AuditEvent, EventType
from governance.identity.operators import principal_for_user
from sagas.console.mixins import ReadOnlyAdminMixin
from sagas.states import NodeStatus

if TYPE_CHECKING:
    _ModelAdmin = admin.ModelAdmin[AuditEvent]
else:
    _ModelAdmin = admin.ModelAdmin


class EventTypeFilter(admin.SimpleListFilter):
    """Every event type, not only those present: the list never needs a scan of the table to build. The
    semantic-saga-mcp names are offered too (audit.seed_names), so an auditor used to them finds our events."""

    title = "event type"
    parameter_name = "event_type"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        ours = [(value, value) for value in EventType.values]
        return ours + [(name, f"{name} (semantic-saga-mcp)") for name in seed_names.seed_only_names()]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        if not self.value():
            return queryset
        try:
            return queryset.filter(seed_names.matching([str(self.value())], NodeStatus.values))
        except ValueError:
            return queryset.none()  # not a name of ours or of the seed's: nothing matches


class ChainKindFilter(admin.SimpleListFilter):
    """Saga chains or control-plane chains (operator changes: kill switch, action contracts, policy revision)."""

    title = "chain kind"
    parameter_name = "chain_kind"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [("saga", "saga"), ("control-plane", "control plane")]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        # By type, which the (tenant_id, event_type) index serves: only control-plane chains hold these types.
        if self.value() == "control-plane":
            return queryset.filter(event_type__in=control_plane.EVENT_TYPES)
        if self.value() == "saga":
            return queryset.exclude(event_type__in=control_plane.EVENT_TYPES)
        return queryset


class SagaFilter(admin.SimpleListFilter):
    """One chain (?saga_id=<uuid>), linked from each row and from the saga's console page."""

    title = "chain"
    parameter_name = "saga_id"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        value = self.value()
        return [(value, value)] if value else []

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        value = self.value()
        if not value:
            return queryset
        try:
            return queryset.filter(saga_id=uuid.UUID(value))
        except ValueError:
            return queryset.none()  # not a saga id: nothing matches


@admin.register(AuditEvent)
class AuditEventAdmin(ReadOnlyAdminMixin, _ModelAdmin):
    list_display = (
        "saga_link",
        "sequence",
        "event_type_shown",
        "actor_principal_id",
        "action",
        "status",
        "created_at_text",
    )
    list_filter = (EventTypeFilter, ChainKindFilter, SagaFilter)
    search_fields = ("=saga_id", "=node_id", "=step_id", "=trace_id", "actor_principal_id", "action")
    # Chain order, served by the (saga_id, sequence) unique index; filter by saga for one chain.
    ordering = ("saga_id", "sequence")
    show_full_result_count = False
    # Facet counts would count the tenant's whole journal once per event type on every page load.
    show_facets = admin.ShowFacets.NEVER
    fields = (
        "saga_id",
        "chain_kind",
        "sequence",
        "event_type",
        "seed_name",
        "created_at_text",
        "actor_principal_id",
        "actor_type",
        "action",
        "action_version",
        "node_id",
        "step_id",
        "status",
        "data",
        "trace_id",
        "span_id",
        "previous_hash",
        "event_hash",
    )
    readonly_fields = fields

    def get_queryset(self, request: HttpRequest) -> QuerySet[AuditEvent]:
        principal = principal_for_user(request.user)
        queryset = super().get_queryset(request)
        if principal is None:
            return queryset.none()
        deployment = control_plane.chain_id(control_plane.SYSTEM_TENANT)
        return queryset.filter(Q(tenant_id=principal.tenant_id) | Q(saga_id=deployment))

    @admin.display(description="event type", ordering="event_type")
    def event_type_shown(self, obj: AuditEvent) -> str:
        """Ours, and under it semantic-saga-mcp's name where it has one (a second line: the table stays narrow)."""
        theirs = seed_names.seed_name(obj.event_type, obj.status, obj.node_id)
        if theirs is None or theirs == obj.event_type:
            return obj.event_type
        return format_html(
            '{}<br><small class="seed-name" title="semantic-saga-mcp name">{}</small>', obj.event_type, theirs
        )

    @admin.display(description="semantic-saga-mcp name")
    def seed_name(self, obj: AuditEvent) -> str:
        return seed_names.seed_name(obj.event_type, obj.status, obj.node_id) or "—"

    @admin.display(description="chain kind")
    def chain_kind(self, obj: AuditEvent) -> str:
        if not control_plane.is_control_plane(obj.saga_id, obj.tenant_id):
            return "saga"
        return "control plane (deployment)" if obj.tenant_id == control_plane.SYSTEM_TENANT else "control plane"

    @admin.display(description="chain", ordering="saga_id")
    def saga_link(self, obj: AuditEvent) -> str:
        url = f"{reverse('admin:audit_auditevent_changelist')}?saga_id={obj.saga_id}"
        if control_plane.is_control_plane(obj.saga_id, obj.tenant_id):
            label = "deployment" if obj.tenant_id == control_plane.SYSTEM_TENANT else f"tenant {obj.tenant_id}"
            return format_html(
                '<a href="{}" title="{}" style="white-space:nowrap" class="control-plane">control plane: {}</a>',
                url,
                obj.saga_id,
                label,
            )
        return format_html(
            '<a href="{}" title="this saga\'s events" style="white-space:nowrap" class="mono">{}</a>', url, obj.saga_id
        )
