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


class ToolPinStatus(models.TextChoices):
    APPROVED = "approved", "approved"  # the server lists the pinned definition
    CHANGED = "changed", "changed"  # the server lists another definition than the pinned one
    PENDING = "pending", "pending"  # nothing pinned yet: new since its server's first listing, or held for review


class ToolPin(models.Model):
    """The definition of one downstream tool (per proxy server name) this deployment trusts, and the one its server
    lists now. The first definition seen of each tool of a server seen for the first time is trusted on first use;
    a definition that differs, or a tool that appears later, waits for an operator to accept it
    (registry.tool_pins), and until then every call of it is held for confirmation with what changed."""

    server = models.CharField(max_length=200)
    tool = models.CharField(max_length=200)
    status = models.CharField(max_length=16, choices=ToolPinStatus.choices)
    pinned_definition = models.JSONField(null=True, blank=True)  # null while pending
    pinned_hash = models.CharField(max_length=64, blank=True, default="")
    seen_definition = models.JSONField()
    seen_hash = models.CharField(max_length=64)
    first_seen_at = models.DateTimeField(auto_now_add=True)
    seen_at = models.DateTimeField(auto_now=True)
    accepted_at = models.DateTimeField(null=True, blank=True)
    accepted_by = models.CharField(max_length=200, blank=True, default="")
    # Why a tool listed at its server's first listing was not trusted on first use (the deployment reviews every
    # tool, or its definition shows signs of tool poisoning): readable lines shown to the operator who reviews it.
    review_reasons = models.JSONField(default=list, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["server", "tool"], name="tool_pin_server_tool_uniq")]
        ordering = ["server", "tool"]

    def __str__(self) -> str:
        return f"{self.server}/{self.tool} ({self.status})"


class ListedServer(models.Model):
    """A downstream server (by proxy server name) the proxy has listed at least once. Its first listing is the
    moment of first use, whatever it held (nothing included): a tool that appears afterwards is a new tool, held
    until an operator accepts it (registry.tool_pins)."""

    server = models.CharField(max_length=200, unique=True)
    first_listed_at = models.DateTimeField(auto_now_add=True)
    # How its first listing was trusted: "first-use" (pinned as listed) or "review" (nothing until accepted).
    trust = models.CharField(max_length=16)
    tools_at_first_listing = models.IntegerField(default=0)

    class Meta:
        ordering = ["server"]

    def __str__(self) -> str:
        return f"{self.server} (first listed {self.first_listed_at:%Y-%m-%d %H:%M}Z, {self.trust})"
