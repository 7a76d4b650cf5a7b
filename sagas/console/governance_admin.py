"""Governance in the admin: operator profiles (superusers) and the kill switch (every operator sees it; tenant
admins engage and release it)."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils.html import format_html

from governance.errors import ServiceError
from governance.identity.operators import principal_for_user
from governance.identity.principal import Principal
from governance.identity.rbac import can
from governance.kill_switch import kill_switch_engage, kill_switch_release
from governance.models import KillSwitch, OperatorProfile

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


class EngageForm(forms.Form):
    saga_id = forms.UUIDField(
        required=False, label="Saga", help_text="Leave empty to stop the whole tenant; give a saga id to stop one saga."
    )
    reason = forms.CharField(widget=forms.Textarea(attrs={"rows": 3, "cols": 60}), help_text="Operators read it.")


@admin.register(KillSwitch)
class KillSwitchAdmin(_KillSwitchModelAdmin):
    """The operator's own tenant's switches. Engage (engage/) and release (<pk>/release/) are confirmation screens
    whose POST calls governance.kill_switch. Django's add and delete views are not used: they run inside the
    admin's own transaction, and the service's durable transaction (the switch must be committed before the
    answer says it is on) refuses to nest in one.
    """

    list_display = ("scope", "engaged_by", "reason", "engaged_at", "release_link")
    fields = ("tenant_id", "saga_id", "engaged_by", "reason", "engaged_at")
    readonly_fields = fields

    @admin.display(description="scope")
    def scope(self, obj: KillSwitch) -> str:
        return f"saga {obj.saga_id}" if obj.saga_id else "whole tenant"

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

    def get_urls(self) -> list[URLPattern]:
        view = self.admin_site.admin_view
        return [
            path("engage/", view(self.engage_view), name="governance_killswitch_engage"),
            path("<int:pk>/release/", view(self.release_view), name="governance_killswitch_release"),
            *super().get_urls(),
        ]

    def changelist_view(self, request: HttpRequest, extra_context: dict[str, Any] | None = None) -> HttpResponse:
        principal = principal_for_user(request.user)
        engage = principal is not None and can(principal, "kill_switch")
        return super().changelist_view(request, {"can_engage": engage, **(extra_context or {})})

    def _principal(self, request: HttpRequest) -> Principal:
        principal = principal_for_user(request.user)
        if principal is None:
            raise PermissionDenied("This account has no operator profile (tenant and role).")
        return principal

    def _screen(self, request: HttpRequest, principal: Principal, template: str, **extra: Any) -> TemplateResponse:
        context = {
            **self.admin_site.each_context(request),
            "opts": self.opts,
            "can_engage": can(principal, "kill_switch"),
            **extra,
        }
        return TemplateResponse(request, f"admin/governance/killswitch/{template}", context)

    def engage_view(self, request: HttpRequest) -> HttpResponse:
        principal = self._principal(request)
        form = EngageForm(request.POST if request.method == "POST" else None)
        if request.method == "POST" and form.is_valid():
            saga_id: uuid.UUID | None = form.cleaned_data["saga_id"]
            try:
                kill_switch_engage(actor=principal, reason=form.cleaned_data["reason"], saga_id=saga_id)
            except ServiceError as error:
                messages.error(request, error.message)
            else:
                scope = f"saga {saga_id}" if saga_id else f"tenant {principal.tenant_id}"
                messages.success(request, f"Kill switch engaged for {scope}: no new forward work starts.")
            return HttpResponseRedirect(reverse("admin:governance_killswitch_changelist"))
        return self._screen(request, principal, "engage.html", title="Engage kill switch", form=form)

    def release_view(self, request: HttpRequest, pk: int) -> HttpResponse:
        principal = self._principal(request)
        switch = self.get_queryset(request).filter(pk=pk).first()
        if switch is None:
            raise Http404("No such kill switch in your tenant.")
        if request.method != "POST":
            return self._screen(request, principal, "release.html", title="Release kill switch", switch=switch)
        try:
            kill_switch_release(actor=principal, saga_id=switch.saga_id)
        except ServiceError as error:
            messages.error(request, error.message)
        else:
            messages.success(request, f"Kill switch released ({self.scope(switch)}): forward work may start again.")
        return HttpResponseRedirect(reverse("admin:governance_killswitch_changelist"))
