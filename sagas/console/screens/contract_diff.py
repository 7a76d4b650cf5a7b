"""The contract diff of the registry browser (/admin/registry/actiondefinition/diff/): a unified diff between two
versions of one action, over their snapshots as canonical JSON (sorted keys) laid out one member per line, which is
what changed between the contracts the steps pinned.

Contracts are the deployment's, not one tenant's: the screen needs the view permission on action definitions, not
an operator profile.
"""

from __future__ import annotations

import difflib
import json
from typing import Any

from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.urls import URLPattern

from registry.models import ActionDefinition
from sagas.console.screens.base import ConsoleScreens

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


class ContractDiffScreen(ConsoleScreens):
    model = ActionDefinition

    def get_urls(self) -> list[URLPattern]:
        return [self.url("diff/", self.diff_view, "registry_actiondefinition_diff")]

    def diff_view(self, request: HttpRequest) -> HttpResponse:
        if not self.site.get_model_admin(ActionDefinition).has_view_permission(request):
            raise PermissionDenied("Comparing contracts needs the view permission on action definitions.")
        action = request.GET.get("action", "")
        versions = list(ActionDefinition.objects.filter(action_id=action).order_by("created_at", "pk"))
        by_version = {row.version: row for row in versions}
        # Default: the newest version against the one before it (what the last registration changed).
        new = by_version.get(request.GET.get("b", "")) or (versions[-1] if versions else None)
        old = by_version.get(request.GET.get("a", "")) or (versions[-2] if len(versions) > 1 else new)
        return self.page(
            request,
            "admin/registry/actiondefinition/diff.html",
            f"Contract diff: {action}" if action else "Contract diff",
            actions=ActionDefinition.objects.order_by("action_id").values_list("action_id", flat=True).distinct(),
            action=action,
            versions=versions,
            old=old,
            new=new,
            diff=contract_diff(old, new) if old and new else [],
        )
