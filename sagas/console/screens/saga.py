"""One saga in the console: its detail page with the workflow DAG (<saga>/detail/), a preview saga's report
(<saga>/preview/), verifying its audit chain (<saga>/verify/, POST only) and the saga-level operations
(<saga>/do/<operation>/, SAGA_OPERATIONS: a GET confirmation page and a POST that acts, then redirects with a message).
"""

from __future__ import annotations

import uuid

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import URLPattern, reverse

from governance.errors import ServiceError
from sagas import selectors
from sagas.console import dag, detail
from sagas.console.screens.base import SagaScreens
from sagas.console.screens.saga_operations import SAGA_OPERATIONS


def _detail_url(saga_id: uuid.UUID) -> str:
    return reverse("admin:sagas_saga_detail", args=[saga_id])


class SagaDetailScreens(SagaScreens):
    def get_urls(self) -> list[URLPattern]:
        return [
            self.url("<uuid:saga_id>/detail/", self.detail_view, "sagas_saga_detail"),
            self.url("<uuid:saga_id>/verify/", self.verify_view, "sagas_saga_verify"),
            self.url("<uuid:saga_id>/preview/", self.preview_view, "sagas_saga_preview"),
            self.url("<uuid:saga_id>/do/<str:operation>/", self.operation_view, "sagas_saga_do"),
        ]

    def detail_view(self, request: HttpRequest, saga_id: uuid.UUID) -> HttpResponse:
        principal = self.principal(request)
        page = self.found(lambda: detail.saga_detail(actor=principal, saga_id=saga_id))
        return self.saga_page(
            request, principal, "admin/sagas/saga/detail.html", f"Saga {saga_id}", detail=page, legend=dag.legend()
        )

    def preview_view(self, request: HttpRequest, saga_id: uuid.UUID) -> HttpResponse:
        """A preview saga's report: would-be effects by reversibility, gates, budget, compensation plan."""
        principal = self.principal(request)
        saga = self.found(lambda: selectors.saga_get(actor=principal, saga_id=saga_id))
        try:
            report = selectors.preview_report(actor=principal, saga_id=saga.id)
        except ServiceError as error:
            messages.error(request, error.message)
            return HttpResponseRedirect(_detail_url(saga.id))
        title = f"Preview report of saga {saga.id}"
        return self.saga_page(request, principal, "admin/sagas/saga/preview.html", title, saga=saga, report=report)

    def verify_view(self, request: HttpRequest, saga_id: uuid.UUID) -> HttpResponse:
        principal = self.principal(request)
        if request.method != "POST":
            return HttpResponseRedirect(_detail_url(saga_id))
        result = self.found(lambda: selectors.saga_verify_audit(actor=principal, saga_id=saga_id))
        if result["valid"]:
            messages.success(
                request,
                f"Audit chain verified: {result['events_checked']} event(s), head hash {result['head_hash']}.",
            )
        else:
            messages.error(
                request,
                f"Audit chain BROKEN at sequence {result['failed_sequence']}: {result.get('reason', '')}. "
                "Treat this saga's evidence as tampered with and compare it with your exported manifests.",
            )
        return HttpResponseRedirect(_detail_url(saga_id))

    def operation_view(self, request: HttpRequest, saga_id: uuid.UUID, operation: str) -> HttpResponse:
        principal = self.principal(request)
        op = SAGA_OPERATIONS.get(operation)
        if op is None:
            raise Http404(f"Unknown operation {operation!r}: the console offers {', '.join(SAGA_OPERATIONS)}.")
        saga = self.found(lambda: selectors.saga_get(actor=principal, saga_id=saga_id))
        if request.method == "POST":
            self.act(request, lambda: op.perform(principal, saga.id))
            return self.back(request, _detail_url(saga.id))
        return self.saga_page(
            request,
            principal,
            "admin/sagas/saga/operation.html",
            op.title,
            saga=saga,
            operation=operation,
            op=op,
            next=request.GET.get("next"),
        )
