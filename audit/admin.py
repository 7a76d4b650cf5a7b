"""Audit evidence is read-only everywhere: add, change and delete are denied.

Events are listed for the operator's tenant only (the denormalized `tenant_id` column), searched on the other
denormalized columns, and filtered by event type and by saga id, the correlation id that ties a saga's chain
together. This module imports no saga code: the audit app stays below the others.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html

from audit.models import AuditEvent, EventType
from saga_project.admin_mixins import ReadOnlyAdminMixin, TenantScopedAdminMixin

if TYPE_CHECKING:
    _ModelAdmin = admin.ModelAdmin[AuditEvent]
else:
    _ModelAdmin = admin.ModelAdmin


class EventTypeFilter(admin.SimpleListFilter):
    """Every event type, not only those present: the list never needs a scan of the table to build."""

    title = "event type"
    parameter_name = "event_type"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [(value, value) for value in EventType.values]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        return queryset.filter(event_type=self.value()) if self.value() else queryset


class SagaFilter(admin.SimpleListFilter):
    """One saga's chain (?saga_id=<uuid>), linked from each row and from the saga's console page."""

    title = "saga"
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
class AuditEventAdmin(TenantScopedAdminMixin, ReadOnlyAdminMixin, _ModelAdmin):
    list_display = ("saga_link", "sequence", "event_type", "actor_principal_id", "action", "status", "created_at_text")
    list_filter = (EventTypeFilter, SagaFilter)
    search_fields = ("=saga_id", "=node_id", "=step_id", "=trace_id", "actor_principal_id", "action")
    # Chain order, served by the (saga_id, sequence) unique index; filter by saga for one chain.
    ordering = ("saga_id", "sequence")
    show_full_result_count = False
    # Facet counts would count the tenant's whole journal once per event type on every page load.
    show_facets = admin.ShowFacets.NEVER
    fields = (
        "saga_id",
        "sequence",
        "event_type",
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

    @admin.display(description="saga", ordering="saga_id")
    def saga_link(self, obj: AuditEvent) -> str:
        url = f"{reverse('admin:audit_auditevent_changelist')}?saga_id={obj.saga_id}"
        return format_html(
            '<a href="{}" title="this saga\'s events" style="white-space:nowrap" class="mono">{}</a>', url, obj.saga_id
        )
