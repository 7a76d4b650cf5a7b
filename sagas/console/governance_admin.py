"""Governance in the admin: operator profiles (superusers) and the kill switch (every operator sees it; tenant
admins engage and release it on the console's kill switch screens, sagas.console.screens.kill_switch)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.urls import reverse
from django.utils.html import format_html

from governance.identity.operators import principal_for_user
from governance.identity.rbac import ADMIN, can
from governance.models import KillSwitch, OperatorProfile
from sagas.console.screens.kill_switch import switch_scope

if TYPE_CHECKING:
    _KillSwitchModelAdmin = admin.ModelAdmin[KillSwitch]
else:
    _KillSwitchModelAdmin = admin.ModelAdmin


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
class KillSwitchAdmin(_KillSwitchModelAdmin):
    """The operator's own tenant's switches, read-only: engaging and releasing are the console's kill switch
    screens (engage/, <pk>/release/), never Django's add and delete views."""

    list_display = ("scope", "engaged_by", "reason", "engaged_at", "release_link")
    fields = ("tenant_id", "saga_id", "engaged_by", "reason", "engaged_at")
    readonly_fields = fields

    @admin.display(description="scope")
    def scope(self, obj: KillSwitch) -> str:
        return switch_scope(obj)

    @admin.display(description="")
    def release_link(self, obj: KillSwitch) -> str:
        url = reverse("admin:governance_killswitch_release", args=[obj.pk])
        return format_html('<a href="{}" id="release-{}">release…</a>', url, obj.pk)

    def get_queryset(self, request: HttpRequest) -> QuerySet[KillSwitch]:
        principal = principal_for_user(request.user)
        queryset = super().get_queryset(request)
        return queryset.filter(tenant_id=principal.tenant_id) if principal else queryset.none()

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

    def has_view_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return principal_for_user(request.user) is not None

    def has_module_permission(self, request: HttpRequest) -> bool:
        return principal_for_user(request.user) is not None

    def changelist_view(self, request: HttpRequest, extra_context: dict[str, Any] | None = None) -> HttpResponse:
        principal = principal_for_user(request.user)
        engage = principal is not None and can(principal, ADMIN)
        return super().changelist_view(request, {"can_engage": engage, **(extra_context or {})})
