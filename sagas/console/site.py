"""Shared admin behaviour. Evidence and contracts are read-only in the admin: state changes go through services.
Saga data is tenant-scoped here exactly as on every other surface.

The admin site itself is `ConsoleAdminSite` (installed by `ConsoleAdminConfig` in INSTALLED_APPS in place of
django.contrib.admin): the same site, whose index is the operator dashboard of the signed-in operator's tenant.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.contrib.admin.apps import AdminConfig
from django.db.models import QuerySet
from django.http import HttpRequest
from django.template.response import TemplateResponse

from governance.errors import ServiceError
from governance.identity.operators import principal_for_user


class ConsoleAdminSite(admin.AdminSite):
    """Django's admin site with the operator dashboard as its index page (templates/admin/index.html)."""

    site_header = "Semantic Saga operator console"
    site_title = "Semantic Saga"
    index_title = "Dashboard"

    def index(self, request: HttpRequest, extra_context: dict[str, Any] | None = None) -> TemplateResponse:
        # Imported here: sagas.admin imports this module, and the dashboard reads import sagas' models.
        from sagas.console.detail import dashboard

        principal = principal_for_user(request.user)
        board = None
        if principal is not None:
            try:
                board = dashboard(actor=principal)
            except ServiceError as error:
                messages.error(request, error.message)
        return super().index(request, {"console": board, "console_principal": principal, **(extra_context or {})})


class ConsoleAdminConfig(AdminConfig):
    """Installs ConsoleAdminSite as `django.contrib.admin.site`, so every @admin.register lands on it."""

    default_site = "sagas.console.site.ConsoleAdminSite"

    def ready(self) -> None:
        super().ready()
        # The model pages of every app live in the console package; Django only autodiscovers `admin` modules.
        from sagas.console import audit_admin, governance_admin, registry_admin, sagas_admin  # noqa: F401


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
