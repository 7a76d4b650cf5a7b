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
