"""Immutable, versioned action contracts.

A row never changes after it is written except for its `active` flag: the same id+version with different content
is refused by `registry.services.action_register`, and steps pin `definition_hash` so a later edit is detectable.
"""

from __future__ import annotations

from django.db import models


class ActionKind(models.TextChoices):
    HTTP = "http", "HTTP request"
    BUILTIN = "builtin", "Builtin"
    MCP = "mcp", "MCP tool call"


class ActionDefinition(models.Model):
    action_id = models.CharField(max_length=200)
    version = models.CharField(max_length=64)
    kind = models.CharField(max_length=16, choices=ActionKind.choices)
    definition = models.JSONField()
    definition_hash = models.CharField(max_length=64)
    active = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["action_id", "version"], name="action_definition_id_version_uniq"),
            # At most one active version per id; also serves "resolve the active version of X".
            models.UniqueConstraint(
                fields=["action_id"],
                condition=models.Q(active=True),
                name="action_definition_one_active_uniq",
            ),
        ]
        ordering = ["action_id", "-created_at"]

    def __str__(self) -> str:
        return f"{self.action_id}@{self.version}"
