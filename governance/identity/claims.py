"""Reading a principal's tenant, type and roles out of token claims, with the configured claim names: one reading for
verified tokens (governance.identity.tokens) and semantic-saga-mcp's static token files (seed_tokens)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from django.conf import settings


def claimed_tenant(claims: Mapping[str, Any]) -> str | None:
    """The first configured tenant claim present (SAGA_JWT_TENANT_CLAIMS), else SAGA_DEFAULT_TENANT when tenantless
    tokens are allowed, else None (the caller refuses, saying which claims it looked for: tenant_claims())."""
    tenant = next((str(claims[name]) for name in settings.SAGA_JWT_TENANT_CLAIMS if claims.get(name)), None)
    if tenant is None and settings.SAGA_JWT_ALLOW_MISSING_TENANT:
        return str(settings.SAGA_DEFAULT_TENANT)
    return tenant


def tenant_claims() -> str:
    return ", ".join(settings.SAGA_JWT_TENANT_CLAIMS)


def principal_kind(claims: Mapping[str, Any], *, has_subject: bool) -> str:
    """The principal type claim (SAGA_JWT_PRINCIPAL_TYPE_CLAIM), else `user` for a subject and `service` otherwise."""
    return str(claims.get(settings.SAGA_JWT_PRINCIPAL_TYPE_CLAIM) or ("user" if has_subject else "service"))


def role_names(names: Iterable[str]) -> frozenset[str]:
    """Role names as RBAC compares them: stripped and lowercased, as semantic-saga-mcp compared them, so an identity
    provider's `Operator` group or a token file's `OPERATOR` is the operator role. Blank names are dropped."""
    return frozenset(name.strip().lower() for name in names if name.strip())
