"""The MCP proxy's sessions in the console, in the ledger's terms: the list (/admin/sagas/saga/proxy-sessions/),
one session (<saga>/session/: its calls, held calls, audit chain, undo requests) and its undo (<saga>/session/undo/:
GET shows the dry run exactly as `semantic-saga undo --dry-run` words it, drift included; POST undoes, through the
same operation (proxy_session_undo) and audit as the terminal, and shows what became of each call). A forced undo
(inverses run although the state drifted) needs a reason, which is kept with the session's undo requests.
"""

from __future__ import annotations

import uuid
from typing import Any

from django.contrib import messages
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import URLPattern, reverse

from governance.errors import ServiceError
from governance.identity.principal import Principal
from sagas.console import sessions
from sagas.console.screens.base import SagaScreens
from sagas.operations.invoke import invoke
from sagas.operations.table import OPERATIONS
from sagas.selectors.proxy_ledger import is_proxy_session
from sagas.selectors.proxy_text import UNDO_COLUMNS, UNDO_FAILED, undo_cells, undo_heading, undo_summary

FORCE_NEEDS_A_REASON = (
    "A forced undo runs inverses even where the world changed since the call, so it needs a reason: say why "
    "overwriting those changes is right, then undo again. Nothing was undone."
)
NOT_CONFIRMED = "Tick the confirmation (you have read the plan above), then undo again. Nothing was undone."


def session_url(saga_id: object) -> str:
    return reverse("admin:sagas_saga_session", args=[saga_id])


class ProxySessionScreens(SagaScreens):
    def get_urls(self) -> list[URLPattern]:
        return [
            self.url("proxy-sessions/", self.list_view, "sagas_saga_proxy_sessions"),
            self.url("<uuid:saga_id>/session/", self.session_view, "sagas_saga_session"),
            self.url("<uuid:saga_id>/session/undo/", self.undo_view, "sagas_saga_session_undo"),
        ]

    def list_view(self, request: HttpRequest) -> HttpResponse:
        principal = self.principal(request)
        filters = sessions.SessionFilters.from_query(request.GET)
        found = sessions.session_list(actor=principal, filters=filters, page_number=request.GET.get("page", 1))
        template = "admin/sagas/saga/proxy_sessions.html"
        return self.saga_page(request, principal, template, "Proxy sessions", listing=found)

    def session_view(self, request: HttpRequest, saga_id: uuid.UUID) -> HttpResponse:
        principal = self.principal(request)
        if not is_proxy_session(actor=principal, saga_id=saga_id):
            # a plain saga (or none of this tenant's): its own page says which
            return HttpResponseRedirect(reverse("admin:sagas_saga_detail", args=[saga_id]))
        detail = self.found(lambda: sessions.session_detail(actor=principal, saga_id=saga_id))
        title = f"Proxy session {saga_id}"
        return self.saga_page(request, principal, "admin/sagas/saga/session.html", title, session=detail)

    def undo_view(self, request: HttpRequest, saga_id: uuid.UUID) -> HttpResponse:
        principal = self.principal(request)
        detail = self.found(lambda: sessions.session_detail(actor=principal, saga_id=saga_id))
        data = request.POST if request.method == "POST" else request.GET
        asked = {
            "saga_id": str(saga_id),
            "to_checkpoint": data.get("to", "").strip(),
            "force": data.get("force") == "on",
            "reason": data.get("reason", "").strip(),
        }
        if request.method == "POST":
            refusal = _refusal(asked, confirmed=data.get("confirm") == "on")
            if refusal:
                messages.error(request, refusal)
            else:
                report = self._undo(request, principal, {**asked, "dry_run": False})
                if report is None:
                    return HttpResponseRedirect(session_url(saga_id))
                return self._report_page(request, principal, detail, report, asked)
        report = self._undo(request, principal, {**asked, "dry_run": True})
        if report is None:
            return HttpResponseRedirect(session_url(saga_id))
        return self._report_page(request, principal, detail, report, asked)

    def _undo(self, request: HttpRequest, principal: Principal, arguments: dict[str, Any]) -> dict[str, Any] | None:
        """The undo (or its dry run) as the operator; a refusal becomes an error message and None."""
        try:
            report: dict[str, Any] = invoke(OPERATIONS["proxy_session_undo"], principal, arguments)
        except ServiceError as error:
            messages.error(request, error.message)
            return None
        if not report["dry_run"]:
            failed = any(item["verdict"] in UNDO_FAILED for item in report["items"])
            (messages.error if failed else messages.success)(request, undo_summary(report))
        return report

    def _report_page(
        self,
        request: HttpRequest,
        principal: Principal,
        detail: sessions.SessionDetail,
        report: dict[str, Any],
        asked: dict[str, Any],
    ) -> HttpResponse:
        rows = [(item, undo_cells(item)) for item in report["items"]]
        title = f"Undo proxy session {detail.saga.id}" + (" (dry run)" if report["dry_run"] else "")
        return self.saga_page(
            request,
            principal,
            "admin/sagas/saga/session_undo.html",
            title,
            session=detail,
            report=report,
            rows=rows,
            columns=UNDO_COLUMNS,
            heading=f"undo session {report['saga_id']}{undo_heading(report)}",
            summary=undo_summary(report),
            asked=asked,
            would_change=any(item["verdict"] == "would_undo" for item in report["items"]),
        )


def _refusal(asked: dict[str, Any], *, confirmed: bool) -> str:
    if not confirmed:
        return NOT_CONFIRMED
    if asked["force"] and not asked["reason"]:
        return FORCE_NEEDS_A_REASON
    return ""
