"""Admin console users as Principals: the same tenancy and RBAC as every other surface."""

from __future__ import annotations

from typing import Any

from django.conf import settings

from governance.identity.principal import Principal


def principal_for_user(user: Any) -> Principal | None:
    """The Principal an admin user acts as, or None when the account may see no tenant.

    A profile decides tenant and role. A superuser without a profile is the admin of the default tenant (the
    installation's own operator); any other account without a profile sees nothing.
    """
    if not getattr(user, "is_authenticated", False) or not getattr(user, "is_active", False):
        return None
    profile = getattr(user, "saga_profile", None)
    if profile is not None:
        tenant, roles = profile.tenant_id, frozenset({profile.role})
    elif user.is_superuser:
        tenant, roles = settings.SAGA_DEFAULT_TENANT, frozenset({"admin"})
    else:
        return None
    return Principal(
        principal_id=f"user:{user.get_username()}",
        tenant_id=tenant,
        principal_type="user",
        roles=roles,
        authenticated=True,
        protocol="admin",
    )
