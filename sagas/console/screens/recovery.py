"""The recovery screen (/admin/sagas/saga/recovery/): every saga that needs an operator, why, and the actions valid
for it; and the node retry it links to (<saga>/nodes/<node>/retry/), which is the retry_saga_step operation, forced only
when the operator ticks that the uncertain outcome was reconciled. Saga-level recovery (roll back, retry
compensation, resume rollback) is a saga operation (sagas.console.screens.saga).
"""

from __future__ import annotations

import uuid

from django.http import Http404, HttpRequest, HttpResponse
from django.urls import URLPattern, reverse

from sagas.console import queues
from sagas.console.screens.base import SagaScreens
from sagas.console.screens.saga_operations import run_ready
from sagas.operations.invoke import invoke
from sagas.operations.table import OPERATIONS


class RecoveryScreens(SagaScreens):
    def get_urls(self) -> list[URLPattern]:
        return [
            self.url("recovery/", self.recovery_view, "sagas_saga_recovery"),
            self.url("<uuid:saga_id>/nodes/<uuid:node_id>/retry/", self.retry_view, "sagas_saga_retry"),
        ]

    def recovery_view(self, request: HttpRequest) -> HttpResponse:
        principal = self.principal(request)
        cases = queues.recovery_cases(actor=principal)
        return self.saga_page(
            request, principal, "admin/sagas/saga/recovery.html", "Recovery", cases=cases, limit=queues.QUEUE_LIMIT
        )

    def retry_view(self, request: HttpRequest, saga_id: uuid.UUID, node_id: uuid.UUID) -> HttpResponse:
        principal = self.principal(request)
        node = self.found(lambda: queues.tenant_nodes(actor=principal, node_ids=[str(node_id)]))[0]
        if node.saga_id != saga_id:
            raise Http404("Node not found in this saga.")
        if request.method != "POST":
            title = f"{'Force retry' if node.uncertain_outcome else 'Retry'} node {node.key or node.id}"
            return self.saga_page(
                request, principal, "admin/sagas/saga/retry.html", title, node=node, next=request.GET.get("next")
            )
        force = request.POST.get("reconciled") == "on"

        def retry() -> str:
            arguments = {"saga_id": str(saga_id), "node_id": str(node_id), "force": force}
            retried = invoke(OPERATIONS["retry_saga_step"], principal, arguments)
            return f"Node {node.key or node.id} is {retried['status']}."

        if self.act(request, retry) and request.POST.get("run_ready"):
            self.act(request, lambda: run_ready(principal, saga_id))
        return self.back(request, reverse("admin:sagas_saga_detail", args=[saga_id]))
