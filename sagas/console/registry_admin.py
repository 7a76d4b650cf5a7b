"""Read-only admin for action contracts: rows are immutable, so add, change and delete are denied.

Contracts are registered with `load_actions` (or `registry.services`), never edited by hand, because running
steps pin their hash. Each row links to the registry browser's contract diff (sagas.console.screens.contract_diff).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.contrib import admin
from django.urls import reverse
from django.utils.html import format_html
from django.utils.http import urlencode

from registry.models import ActionDefinition
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
