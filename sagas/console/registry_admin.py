"""Read-only admin for action contracts and the proxy's tool pins: rows change only through their services, so add,
change and delete are denied.

Contracts are registered with `load_actions` (or `registry.services`), never edited by hand, because running
steps pin their hash. Each row links to the registry browser's contract diff (sagas.console.screens.contract_diff).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.contrib import admin
from django.urls import reverse
from django.utils.html import format_html
from django.utils.http import urlencode

from registry.models import ActionDefinition, ToolPin
from registry.tool_pins import pin_state
from sagas.console.mixins import ReadOnlyAdminMixin
from sagas.console.screens.contract_diff import snapshot_lines

if TYPE_CHECKING:
    _ModelAdmin = admin.ModelAdmin[ActionDefinition]
else:
    _ModelAdmin = admin.ModelAdmin


@admin.register(ActionDefinition)
class ActionDefinitionAdmin(ReadOnlyAdminMixin, _ModelAdmin):
    list_display = ("action_id", "version", "kind", "active", "short_hash", "created_at", "compare_link")
    list_filter = ("kind", "active")
    search_fields = ("action_id", "=definition_hash")
    ordering = ("action_id", "-created_at")
    fields = ("action_id", "version", "kind", "active", "definition_hash", "created_at", "pretty_definition")
    readonly_fields = fields

    @admin.display(description="hash")
    def short_hash(self, obj: ActionDefinition) -> str:
        return format_html('<span title="{}">{}</span>', obj.definition_hash, obj.definition_hash[:12])

    @admin.display(description="definition")
    def pretty_definition(self, obj: ActionDefinition) -> str:
        return format_html("<pre>{}</pre>", "\n".join(snapshot_lines(obj.definition)))

    @admin.display(description="diff")
    def compare_link(self, obj: ActionDefinition) -> str:
        query = urlencode({"action": obj.action_id, "b": obj.version})
        url = f"{reverse('admin:registry_actiondefinition_diff')}?{query}"
        return format_html('<a href="{}" id="compare-{}-{}">compare…</a>', url, obj.action_id, obj.version)


if TYPE_CHECKING:
    _PinAdmin = admin.ModelAdmin[ToolPin]
else:
    _PinAdmin = admin.ModelAdmin


@admin.register(ToolPin)
class ToolPinAdmin(ReadOnlyAdminMixin, _PinAdmin):
    """The downstream tool definitions the MCP proxy trusts (registry.tool_pins). Deployment-wide, like contracts.
    A changed or pending tool links to its review screen (sagas.console.screens.tool_pins), where an operator sees
    what changed and accepts it."""

    list_display = ("server", "tool", "status_badge", "accepted_by", "seen_at", "review_link")
    list_filter = ("status", "server")
    search_fields = ("server", "tool")
    ordering = ("server", "tool")
    fields = ("server", "tool", "status", "accepted_by", "accepted_at", "first_seen_at", "seen_at", "changes")
    readonly_fields = fields

    @admin.display(description="status", ordering="status")
    def status_badge(self, obj: ToolPin) -> str:
        style = {"approved": "st-COMPLETED", "changed": "st-FAILED", "pending": "st-EXECUTING"}.get(obj.status, "")
        return format_html('<span class="badge {}" id="pin-status-{}">{}</span>', style, obj.pk, obj.status)

    @admin.display(description="what changed")
    def changes(self, obj: ToolPin) -> str:
        lines = pin_state(obj).changes or ("the server lists the pinned definition",)
        return format_html("<pre>{}</pre>", "\n".join(lines))

    @admin.display(description="review")
    def review_link(self, obj: ToolPin) -> str:
        if obj.status == "approved":
            return "-"
        url = reverse("admin:registry_toolpin_review", args=[obj.pk])
        return format_html('<a href="{}" id="review-pin-{}">review and accept…</a>', url, obj.pk)
