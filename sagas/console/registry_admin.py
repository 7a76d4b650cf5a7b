"""Read-only admin for action contracts: rows are immutable, so add, change and delete are denied.

Contracts are registered with `load_actions` (or `registry.services`), never edited by hand, because running
steps pin their hash. The registry browser adds one screen, /admin/registry/actiondefinition/diff/: a unified
diff between two versions of one action, over their snapshots as canonical JSON (sorted keys) laid out one
member per line, which is what changed between the contracts the steps pinned.
"""

from __future__ import annotations

import difflib
import json
from typing import TYPE_CHECKING, Any

from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils.html import format_html
from django.utils.http import urlencode

from registry.models import ActionDefinition
from sagas.console.site import ReadOnlyAdminMixin

if TYPE_CHECKING:
    _ModelAdmin = admin.ModelAdmin[ActionDefinition]
else:
    _ModelAdmin = admin.ModelAdmin

# Unchanged lines kept around each change: enough to see where in the contract it sits.
DIFF_CONTEXT_LINES = 3


def snapshot_lines(definition: dict[str, Any]) -> list[str]:
    """The stored snapshot as sorted-key JSON, one member per line (the canonical form, readable)."""
    return json.dumps(definition, indent=2, sort_keys=True, ensure_ascii=False).splitlines()


def contract_diff(old: ActionDefinition, new: ActionDefinition) -> list[tuple[str, str]]:
    """(css class, line) pairs of the unified diff from `old` to `new`; empty when the snapshots are identical."""
    lines = difflib.unified_diff(
        snapshot_lines(old.definition),
        snapshot_lines(new.definition),
        fromfile=f"{old.action_id}@{old.version} ({old.definition_hash[:12]})",
        tofile=f"{new.action_id}@{new.version} ({new.definition_hash[:12]})",
        lineterm="",
        n=DIFF_CONTEXT_LINES,
    )
    return [(_line_class(line), line) for line in lines]


def _line_class(line: str) -> str:
    if line.startswith(("---", "+++", "@@")):
        return "hunk"
    return {"+": "add", "-": "del"}.get(line[:1], "ctx")


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

    def get_urls(self) -> list[URLPattern]:
        diff = path("diff/", self.admin_site.admin_view(self.diff_view), name="registry_actiondefinition_diff")
        return [diff, *super().get_urls()]

    def diff_view(self, request: HttpRequest) -> HttpResponse:
        if not self.has_view_permission(request):
            raise PermissionDenied
        action = request.GET.get("action", "")
        versions = list(ActionDefinition.objects.filter(action_id=action).order_by("created_at", "pk"))
        by_version = {row.version: row for row in versions}
        # Default: the newest version against the one before it (what the last registration changed).
        new = by_version.get(request.GET.get("b", "")) or (versions[-1] if versions else None)
        old = by_version.get(request.GET.get("a", "")) or (versions[-2] if len(versions) > 1 else new)
        context = {
            **self.admin_site.each_context(request),
            "opts": self.opts,
            "title": f"Contract diff: {action}" if action else "Contract diff",
            "actions": ActionDefinition.objects.order_by("action_id").values_list("action_id", flat=True).distinct(),
            "action": action,
            "versions": versions,
            "old": old,
            "new": new,
            "diff": contract_diff(old, new) if old and new else [],
        }
        return TemplateResponse(request, "admin/registry/actiondefinition/diff.html", context)
