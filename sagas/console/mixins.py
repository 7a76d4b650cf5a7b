"""What the console's model pages share. Evidence and contracts are read-only in the admin: state changes go through
the coordinator and the services, never through a model form. Saga data is tenant-scoped here exactly as on every
other surface.
"""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from django.http import HttpRequest

from governance.identity.operators import principal_for_user


class ReadOnlyAdminMixin:
    """Deny add, change and delete; viewing stays available to staff with the view permission."""

    def has_add_permission(self, request: HttpRequest, *args: Any) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class TenantScopedAdminMixin:
    """Rows of the operator's tenant only; `tenant_field` is the lookup to the row's tenant id."""

    tenant_field = "tenant_id"

    def get_queryset(self, request: HttpRequest) -> QuerySet[Any]:
        queryset: QuerySet[Any] = super().get_queryset(request)  # type: ignore[misc]
        principal = principal_for_user(request.user)
        if principal is None:
            return queryset.none()
        return queryset.filter(**{self.tenant_field: principal.tenant_id})
