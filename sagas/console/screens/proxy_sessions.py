"""The MCP proxy's sessions in the console, in the ledger's terms: the list (/admin/sagas/saga/proxy-sessions/),
one session (<saga>/session/: its calls, held calls, audit chain, undo requests) and its undo (<saga>/session/undo/:
GET shows the dry run exactly as `semantic-saga undo --dry-run` words it, drift included; POST undoes, through the
same operation (proxy_session_undo) and audit as the terminal, and shows what became of each call). A forced undo
(inverses run although the state drifted) needs a reason, which is kept with the session's undo requests.
"""

from __future__ import annotations

import hashlib
import json
import unicodedata
import uuid
from collections import Counter
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
from sagas.selectors.proxy_sessions import is_proxy_session
from sagas.selectors.proxy_text import UNDO_COLUMNS, UNDO_FAILED, undo_cells, undo_heading, undo_summary
from sagas.selectors.undo_plan import MAX_UNDO_REASON_CHARS

FORCE_NEEDS_A_REASON = (
    "A forced undo runs inverses even where the world changed since the call, so it needs a reason: say why "
    "overwriting those changes is right, then undo again. Nothing was undone."
)
NOT_CONFIRMED = "Tick the confirmation (you have read the plan above), then undo again. Nothing was undone."
PLAN_CHANGED = (
    "The plan changed since you read it (the agent made another call, a call finished, or the state drifted): read "
    "the plan below and confirm again. Nothing was undone."
)


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
        plan = self._undo(request, principal, {**asked, "reason": "", "dry_run": True})  # a plan records nothing
        if plan is None:
            return HttpResponseRedirect(session_url(saga_id))
        if request.method == "POST":
            refusal = _refusal(asked, confirmed=data.get("confirm") == "on")
            if not refusal and data.get("plan", "") != plan_digest(plan):
                refusal = PLAN_CHANGED
            if refusal:
                messages.error(request, refusal)
            else:
                done = self._undo(request, principal, {**asked, "dry_run": False})
                if done is None:
                    return HttpResponseRedirect(session_url(saga_id))
                return self._report_page(request, principal, detail, done, asked)
        return self._report_page(request, principal, detail, plan, asked)

    def _undo(self, request: HttpRequest, principal: Principal, arguments: dict[str, Any]) -> dict[str, Any] | None:
        """The undo (or its dry run) as the operator; a refusal becomes an error message and None."""
        try:
            report: dict[str, Any] = invoke(OPERATIONS["proxy_session_undo"], principal, arguments)
        except ServiceError as error:
            messages.error(request, error.message)
            return None
        if not report["dry_run"]:
            state = (report.get("outcome") or {}).get("state", "")
            failed = state in ("undo_stopped", "undo_interrupted") or (
                not state and any(item["verdict"] in UNDO_FAILED for item in report["items"])
            )
            said = (
                messages.error
                if failed
                else messages.warning
                if state == "undone_with_calls_left"
                else messages.success
            )
            said(request, undo_summary(report))
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
            plan=plan_digest(report),
            counts=Counter(item["verdict"] for item in report["items"]),
            undoable=detail.undoable,
        )


def _refusal(asked: dict[str, Any], *, confirmed: bool) -> str:
    if not confirmed:
        return NOT_CONFIRMED
    if asked["force"] and not _visible(asked["reason"]):
        return FORCE_NEEDS_A_REASON
    if len(asked["reason"]) > MAX_UNDO_REASON_CHARS:
        return (
            f"The reason is {len(asked['reason'])} characters; keep it to {MAX_UNDO_REASON_CHARS} (say why, and put "
            "the rest in your ticket). Nothing was undone."
        )
    return ""


def _visible(reason: str) -> bool:
    """A reason someone can read: at least one character that is neither white space nor an invisible format
    character (a zero-width space is not a reason)."""
    return any(not ch.isspace() and unicodedata.category(ch) not in ("Cf", "Cc", "Zs") for ch in reason)


def plan_digest(report: dict[str, Any]) -> str:
    """What an operator confirms: each call's verdict and the inverse it would send, for these options. The undo
    runs only if the plan computed when the confirmation arrives is the same, so a call the agent made since, or
    another checkpoint, is shown before anything is undone."""
    shown = [(item["step_id"], item["verdict"], item["inverse"]) for item in report["items"]]
    return hashlib.sha256(json.dumps([report["checkpoint"], shown], sort_keys=True).encode()).hexdigest()
