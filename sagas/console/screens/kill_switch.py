"""Engaging (/admin/governance/killswitch/engage/) and releasing (<pk>/release/) the kill switch of the operator's
tenant: confirmation screens whose POST calls governance.kill_switch, which allows it to tenant admins only.

Django's add and delete views are not used: they run inside the admin's own transaction, and the service's durable
transaction (the switch must be committed before the answer says it is on) refuses to nest in one.
"""

from __future__ import annotations

import uuid

from django import forms
from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import URLPattern, reverse

from governance.errors import ServiceError
from governance.identity.principal import Principal
from governance.identity.rbac import ADMIN, can
from governance.kill_switch import kill_switch_engage, kill_switch_release
from governance.models import KillSwitch
from sagas.console.screens.base import ConsoleScreens


class EngageForm(forms.Form):
    saga_id = forms.UUIDField(
        required=False, label="Saga", help_text="Leave empty to stop the whole tenant; give a saga id to stop one saga."
    )
    reason = forms.CharField(widget=forms.Textarea(attrs={"rows": 3, "cols": 60}), help_text="Operators read it.")


def switch_scope(switch: KillSwitch) -> str:
    return f"saga {switch.saga_id}" if switch.saga_id else "whole tenant"


class KillSwitchScreens(ConsoleScreens):
    model = KillSwitch

    def get_urls(self) -> list[URLPattern]:
        return [
            self.url("engage/", self.engage_view, "governance_killswitch_engage"),
            self.url("<int:pk>/release/", self.release_view, "governance_killswitch_release"),
        ]

    def engage_view(self, request: HttpRequest) -> HttpResponse:
        principal = self.principal(request)
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
        return self._screen(request, principal, "engage.html", "Engage kill switch", form=form)

    def release_view(self, request: HttpRequest, pk: int) -> HttpResponse:
        principal = self.principal(request)
        switch = KillSwitch.objects.filter(tenant_id=principal.tenant_id, pk=pk).first()
        if switch is None:
            raise Http404("No such kill switch in your tenant.")
        if request.method != "POST":
            return self._screen(request, principal, "release.html", "Release kill switch", switch=switch)
        try:
            kill_switch_release(actor=principal, saga_id=switch.saga_id)
        except ServiceError as error:
            messages.error(request, error.message)
        else:
            scope = switch_scope(switch)
            messages.success(request, f"Kill switch released ({scope}): forward work may start again.")
        return HttpResponseRedirect(reverse("admin:governance_killswitch_changelist"))

    def _screen(
        self, request: HttpRequest, principal: Principal, template: str, title: str, **extra: object
    ) -> TemplateResponse:
        # The buttons follow the role; governance.kill_switch checks again, so a forged POST is refused.
        engage = can(principal, ADMIN)
        return self.page(request, f"admin/governance/killswitch/{template}", title, can_engage=engage, **extra)
