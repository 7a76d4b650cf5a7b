"""Audit evidence is read-only everywhere: add, change and delete are denied."""

from __future__ import annotations

from django.contrib import admin

from audit.models import AuditEvent
from saga_project.admin_mixins import ReadOnlyAdminMixin, TenantScopedAdminMixin


@admin.register(AuditEvent)
class AuditEventAdmin(TenantScopedAdminMixin, ReadOnlyAdminMixin, admin.ModelAdmin):  # type: ignore[type-arg]
    list_display = ("saga_id", "sequence", "event_type", "actor_principal_id", "action", "status", "created_at_text")
    list_filter = ("event_type",)
    search_fields = ("=saga_id", "actor_principal_id", "action")
    show_full_result_count = False
