from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest

from governance.kill_switch import kill_switch_engage, kill_switch_release
from governance.models import KillSwitch, OperatorProfile
from governance.operators import principal_for_user
from governance.rbac import can


@admin.register(OperatorProfile)
class OperatorProfileAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    """Superusers assign each operator a tenant and a role (OIDC logins keep theirs in sync from claims)."""

    list_display = ("user", "tenant_id", "role")
    list_filter = ("role", "tenant_id")
    search_fields = ("user__username", "tenant_id")
    raw_id_fields = ("user",)

    def has_module_permission(self, request: object) -> bool:
        return bool(getattr(getattr(request, "user", None), "is_superuser", False))


@admin.register(KillSwitch)
class KillSwitchAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    """Engaging (add) and releasing (delete) go through governance.kill_switch, for the operator's own tenant.

    Leave the saga empty to stop the whole tenant. Every operator of the tenant sees the switches (the dashboard
    links here and shows a tenant-wide one); only its admins engage and release them.
    """

    list_display = ("scope", "tenant_id", "engaged_by", "reason", "engaged_at")
    fields = ("saga_id", "reason")

    @admin.display(description="scope")
    def scope(self, obj: KillSwitch) -> str:
        return f"saga {obj.saga_id}" if obj.saga_id else "whole tenant"

    def get_queryset(self, request: HttpRequest) -> QuerySet[KillSwitch]:
        principal = principal_for_user(request.user)
        queryset = super().get_queryset(request)
        return queryset.filter(tenant_id=principal.tenant_id) if principal else queryset.none()

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

    def has_add_permission(self, request: HttpRequest) -> bool:
        return self._is_tenant_admin(request)

    def has_delete_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return self._is_tenant_admin(request)

    def has_view_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return principal_for_user(request.user) is not None

    def has_module_permission(self, request: HttpRequest) -> bool:
        return principal_for_user(request.user) is not None

    @staticmethod
    def _is_tenant_admin(request: HttpRequest) -> bool:
        principal = principal_for_user(request.user)
        return principal is not None and can(principal, "kill_switch")

    def save_model(self, request: HttpRequest, obj: KillSwitch, form: Any, change: bool) -> None:
        principal = principal_for_user(request.user)
        assert principal is not None  # has_add_permission let only tenant admins here
        engaged = kill_switch_engage(actor=principal, reason=obj.reason, saga_id=obj.saga_id)
        obj.pk, obj.tenant_id, obj.engaged_by = engaged.pk, engaged.tenant_id, engaged.engaged_by

    def delete_model(self, request: HttpRequest, obj: KillSwitch) -> None:
        principal = principal_for_user(request.user)
        assert principal is not None
        kill_switch_release(actor=principal, saga_id=obj.saga_id)
