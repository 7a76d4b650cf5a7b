"""Operators of the admin console: which tenant they act in and with which role."""

from __future__ import annotations

from django.conf import settings
from django.db import models


class OperatorRole(models.TextChoices):
    VIEWER = "viewer", "Viewer (read only)"
    OPERATOR = "operator", "Operator (run, approve, recover)"
    ADMIN = "admin", "Admin (everything in the tenant)"


class OperatorProfile(models.Model):
    """An admin account's tenant and role. Set by a superuser, or from OIDC claims at each login."""

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="saga_profile")
    tenant_id = models.CharField(max_length=200)
    role = models.CharField(max_length=16, choices=OperatorRole.choices, default=OperatorRole.VIEWER)

    def __str__(self) -> str:
        return f"{self.user} @ {self.tenant_id} ({self.role})"


class KillSwitch(models.Model):
    """An engaged stop on new forward work: a whole tenant (saga_id empty) or one saga.

    While a row exists, the coordinator refuses to begin, plan, execute or run, and workers refuse to start queued
    nodes; rollback and rejection stay available. Releasing deletes the row; both are audited by the caller.
    """

    tenant_id = models.CharField(max_length=200)
    saga_id = models.UUIDField(null=True, blank=True)
    engaged_by = models.CharField(max_length=200)
    reason = models.TextField()
    engaged_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            # One switch per scope; also serves the per-claim lookup by (tenant, saga).
            models.UniqueConstraint(fields=["tenant_id", "saga_id"], name="kill_switch_scope_uniq"),
            models.UniqueConstraint(
                fields=["tenant_id"], condition=models.Q(saga_id__isnull=True), name="kill_switch_tenant_uniq"
            ),
        ]

    def __str__(self) -> str:
        scope = f"saga {self.saga_id}" if self.saga_id else "whole tenant"
        return f"kill switch {self.tenant_id} ({scope})"
