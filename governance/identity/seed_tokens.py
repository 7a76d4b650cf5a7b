"""semantic-saga-mcp's static token file, read as it is: `{"<token>": {"client_id", "subject", "scopes",
"expires_at", "claims": {"tenant_id", "roles", "principal_type"}}}` (no "tokens" wrapper).

The principal is the subject, else the client id; the tenant, roles and principal type come from the claims named by
SAGA_JWT_TENANT_CLAIMS, SAGA_JWT_ROLES_CLAIM and SAGA_JWT_PRINCIPAL_TYPE_CLAIM (the seed's --auth-tenant-claim,
--auth-roles-claim, --auth-principal-type-claim apply to its static tokens as to JWTs), so a token means here what it
meant there. Unlike the seed, which refused a tenantless token at each request, such an entry stops start-up.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from governance.identity.claims import claimed_tenant, principal_kind, tenant_claims


def is_seed_document(document: Any) -> bool:
    """Ours has one key, "tokens", whose value maps tokens to entries; the seed's maps tokens to entries directly,
    each with a client_id (so a seed file holding a token literally named "tokens" is still read as the seed's)."""
    if not isinstance(document, dict) or not document:
        return False
    ours = set(document) == {"tokens"} and isinstance(document["tokens"], dict)
    return not ours or "client_id" in document["tokens"]


def seed_entry(spec: Any, where: str) -> dict[str, Any]:
    """One seed entry as the fields of our entry (principal_id, tenant_id, principal_type, roles, scopes,
    expires_at); raises ImproperlyConfigured naming `where` and what is missing."""
    if not isinstance(spec, dict):
        raise ImproperlyConfigured(f"{where} must be an object with client_id, subject, scopes and claims.")
    client_id, subject = spec.get("client_id"), spec.get("subject")
    if not isinstance(client_id, str) or not client_id:
        raise ImproperlyConfigured(f"{where} needs a client_id (semantic-saga-mcp's static token format).")
    claims = spec.get("claims", {})
    scopes = spec.get("scopes", [])
    if not isinstance(claims, dict) or not isinstance(scopes, list):
        raise ImproperlyConfigured(f"{where}: claims must be an object and scopes a list of names.")
    tenant = claimed_tenant(claims)
    if tenant is None:
        raise ImproperlyConfigured(
            f"{where} ({subject or client_id}) has no tenant claim ({tenant_claims()}) "
            'in "claims". Add one, or allow tenantless tokens with --auth-allow-missing-tenant '
            "(SAGA_JWT_ALLOW_MISSING_TENANT=true; they get SAGA_DEFAULT_TENANT)."
        )
    expires_at = spec.get("expires_at")
    if expires_at is not None and not isinstance(expires_at, int | float):
        raise ImproperlyConfigured(f"{where}: expires_at must be a Unix time in seconds, or absent.")
    kind = principal_kind(claims, has_subject=bool(subject))
    return {
        "principal_id": str(subject or client_id),
        "tenant_id": tenant,
        "principal_type": kind,
        "roles": claims.get(settings.SAGA_JWT_ROLES_CLAIM),
        "scopes": scopes,
        "expires_at": float(expires_at) if expires_at is not None else None,
    }
