from __future__ import annotations

from django.contrib import admin

from governance.models import OperatorProfile


@admin.register(OperatorProfile)
class OperatorProfileAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    """Superusers assign each operator a tenant and a role (OIDC logins keep theirs in sync from claims)."""

    list_display = ("user", "tenant_id", "role")
    list_filter = ("role", "tenant_id")
    search_fields = ("user__username", "tenant_id")
    raw_id_fields = ("user",)

    def has_module_permission(self, request: object) -> bool:
        return bool(getattr(getattr(request, "user", None), "is_superuser", False))
