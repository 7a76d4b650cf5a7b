"""Audit evidence is read-only everywhere: add, change and delete are denied."""

from __future__ import annotations

from django.contrib import admin
from django.http import HttpRequest

from audit.models import AuditEvent


@admin.register(AuditEvent)
class AuditEventAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    list_display = ("saga_id", "sequence", "event_type", "actor_principal_id", "action", "status", "created_at_text")
    list_filter = ("event_type",)
    search_fields = ("=saga_id", "actor_principal_id", "action")
    show_full_result_count = False

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object | None = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: object | None = None) -> bool:
        return False
