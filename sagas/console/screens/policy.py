"""The policy screen (/admin/sagas/saga/policy/): the tenant's governance backend, revision, budgets and rules, and
its newest POLICY_DECISION events (sagas.console.detail.policy_page). A backend that cannot be read is shown as an
error message above an empty page, never as a server error.
"""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.urls import URLPattern

from governance.errors import ServiceError
from sagas.console import detail
from sagas.console.screens.base import SagaScreens


class PolicyScreen(SagaScreens):
    def get_urls(self) -> list[URLPattern]:
        return [self.url("policy/", self.policy_view, "sagas_saga_policy")]

    def policy_view(self, request: HttpRequest) -> HttpResponse:
        principal = self.principal(request)
        page: dict[str, Any]
        try:
            page = detail.policy_page(actor=principal)
        except ServiceError as error:
            messages.error(request, error.message)
            page = {"status": None, "decisions": []}
        return self.saga_page(request, principal, "admin/sagas/saga/policy.html", "Policy status and decisions", **page)
