"""Read-only admin for action contracts: rows are immutable, so add, change and delete are denied.

Contracts are registered with `load_actions` (or `registry.services`), never edited by hand, because running
steps pin their hash.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from django.contrib import admin
from django.utils.html import format_html

from registry.models import ActionDefinition
from saga_project.admin_mixins import ReadOnlyAdminMixin

if TYPE_CHECKING:
    _ModelAdmin = admin.ModelAdmin[ActionDefinition]
else:
    _ModelAdmin = admin.ModelAdmin


@admin.register(ActionDefinition)
class ActionDefinitionAdmin(ReadOnlyAdminMixin, _ModelAdmin):
    list_display = ("action_id", "version", "kind", "active", "short_hash", "created_at")
    list_filter = ("kind", "active")
    search_fields = ("action_id",)
    ordering = ("action_id", "-created_at")
    fields = ("action_id", "version", "kind", "active", "definition_hash", "created_at", "pretty_definition")
    readonly_fields = fields

    @admin.display(description="hash")
    def short_hash(self, obj: ActionDefinition) -> str:
        return obj.definition_hash[:12]

    @admin.display(description="definition")
    def pretty_definition(self, obj: ActionDefinition) -> str:
        return format_html("<pre>{}</pre>", json.dumps(obj.definition, indent=2, sort_keys=True))
