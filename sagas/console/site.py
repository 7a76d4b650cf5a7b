"""The console's admin site: Django's admin, whose index is the operator dashboard of the signed-in operator's tenant,
whose login page offers single sign-on when OIDC is configured, and which serves the console's screens
(sagas.console.screens) beside the model pages.

Installed by sagas.console.apps.ConsoleAdminConfig in place of django.contrib.admin, so it is
`django.contrib.admin.site` and every @admin.register lands on it.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib import admin, messages
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import URLPattern, URLResolver

from governance.errors import ServiceError
from governance.identity.operators import principal_for_user
from sagas.console.detail import dashboard
from sagas.console.screens.approvals import ApprovalScreens
from sagas.console.screens.base import ConsoleScreens
from sagas.console.screens.contract_diff import ContractDiffScreen
from sagas.console.screens.kill_switch import KillSwitchScreens
from sagas.console.screens.policy import PolicyScreen
from sagas.console.screens.proxy_sessions import ProxySessionScreens
from sagas.console.screens.recovery import RecoveryScreens
from sagas.console.screens.saga import SagaDetailScreens
from sagas.console.screens.tool_pins import ToolPinScreens

SCREENS: tuple[type[ConsoleScreens], ...] = (
    ApprovalScreens,
    RecoveryScreens,
    SagaDetailScreens,
    ProxySessionScreens,
    PolicyScreen,
    KillSwitchScreens,
    ContractDiffScreen,
    ToolPinScreens,
)


class ConsoleAdminSite(admin.AdminSite):
    """Django's admin site with the operator dashboard as its index page (templates/admin/index.html)."""

    site_header = "Semantic Saga operator console"
    site_title = "Semantic Saga"
    index_title = "Dashboard"
    # The console's links sit in the header on every page (templates/admin/base_site.html) and the dashboard lists
    # every model page; Django's sidebar would take a quarter of a 1280 px screen from the tables.
    enable_nav_sidebar = False

    def get_urls(self) -> list[URLResolver | URLPattern]:
        screens = [pattern for screen in SCREENS for pattern in screen(self).get_urls()]
        # Ours first: a model page's `<path:object_id>/` pattern would swallow them.
        return [*screens, *super().get_urls()]

    def index(self, request: HttpRequest, extra_context: dict[str, Any] | None = None) -> TemplateResponse:
        principal = principal_for_user(request.user)
        board = None
        if principal is not None:
            try:
                board = dashboard(actor=principal)
            except ServiceError as error:
                messages.error(request, error.message)
        return super().index(request, {"console": board, "console_principal": principal, **(extra_context or {})})

    def login(self, request: HttpRequest, extra_context: dict[str, Any] | None = None) -> HttpResponse:
        # templates/admin/login.html shows the single sign-on button (governance.identity.oidc) only when enabled.
        sso = {"saga_oidc_enabled": bool(settings.SAGA_OIDC_ENABLED)}
        return super().login(request, {**sso, **(extra_context or {})})
