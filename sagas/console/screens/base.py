"""What every console screen does: who is asking, the page frame, the redirect back, and refusals as messages.

A screen is a group of views the console site registers (ConsoleAdminSite.get_urls) beside Django's model pages,
like a ModelAdmin's extra views but without one: each subject (approvals, recovery, one saga, policy, kill switch,
contract diff) is its own class in its own module. Screens read through sagas.console's reads and change state only
by calling the coordinator (or governance.kill_switch) as the signed-in operator's Principal.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any, ClassVar, TypeVar

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db.models import Model
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import URLPattern, path
from django.utils.http import url_has_allowed_host_and_scheme

from governance.errors import ServiceError
from governance.identity.operators import principal_for_user
from governance.identity.principal import Principal
from governance.identity.rbac import DECIDE, EXECUTE, can
from sagas.errors import NotFound
from sagas.models import Saga

Read = TypeVar("Read")
View = Callable[..., HttpResponse]


class ConsoleScreens(ABC):
    """Views of one subject. `model` is the model whose admin page the screens sit under: its view permission
    admits the operator (the model admin's own rule) and its options frame the page."""

    model: ClassVar[type[Model]]

    def __init__(self, site: admin.AdminSite) -> None:
        self.site = site

    @abstractmethod
    def get_urls(self) -> list[URLPattern]:
        """The screens' URL patterns, each made with `url` (the site puts them before its model pages)."""

    def url(self, route: str, view: View, name: str) -> URLPattern:
        """`route` below the model's admin path (sagas/saga/, ...), behind the admin's login and staff check."""
        prefix = f"{self.model._meta.app_label}/{self.model._meta.model_name}/"
        return path(prefix + route, self.site.admin_view(view), name=name)

    def principal(self, request: HttpRequest) -> Principal:
        principal = principal_for_user(request.user)
        if principal is None or not self.site.get_model_admin(self.model).has_view_permission(request):
            raise PermissionDenied("This account has no operator profile (tenant and role) or no view permission.")
        return principal

    def page(self, request: HttpRequest, template: str, title: str, **extra: Any) -> TemplateResponse:
        context = {**self.site.each_context(request), "opts": self.model._meta, "title": title, **extra}
        return TemplateResponse(request, template, context)

    @staticmethod
    def back(request: HttpRequest, default: str) -> HttpResponseRedirect:
        """To the page the form came from (`next`) when it is on this host, else to `default`."""
        target = request.POST.get("next") or request.GET.get("next") or ""
        safe = url_has_allowed_host_and_scheme(target, {request.get_host()}, require_https=request.is_secure())
        return HttpResponseRedirect(target if safe else default)

    @staticmethod
    def found(read: Callable[[], Read]) -> Read:
        """Another tenant's saga or node answers 404, exactly like a missing one."""
        try:
            return read()
        except NotFound as missing:
            raise Http404(missing.message) from missing

    @staticmethod
    def act(request: HttpRequest, perform: Callable[[], str]) -> bool:
        """Run one change; its summary becomes a success message, a refusal an error message saying what to do."""
        try:
            messages.success(request, perform())
        except ServiceError as error:
            messages.error(request, error.message)
            return False
        return True


class SagaScreens(ConsoleScreens):
    """Screens under /admin/sagas/saga/: they show the acting principal and offer buttons by role."""

    model = Saga

    def saga_page(
        self, request: HttpRequest, principal: Principal, template: str, title: str, **extra: Any
    ) -> TemplateResponse:
        # Buttons follow the role; the coordinator checks again, so a forged POST is refused all the same.
        can_execute, can_decide = can(principal, EXECUTE), can(principal, DECIDE)
        return self.page(
            request, template, title, principal=principal, can_execute=can_execute, can_decide=can_decide, **extra
        )
