"""The approval queue (/admin/sagas/saga/approvals/) and its confirmation page (approvals/decide/): approve or reject
one node or several, then optionally run the sagas' ready nodes. Each decision is the approve_saga_step operation as the
operator; a refusal for one node is shown and the others are still decided.
"""

from __future__ import annotations

from functools import partial

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse
from django.urls import URLPattern, reverse

from governance.errors import ServiceError
from governance.identity.principal import Principal
from sagas.console import queues
from sagas.console.screens.base import SagaScreens
from sagas.console.screens.saga_operations import run_ready
from sagas.models import Node
from sagas.operations.invoke import invoke
from sagas.operations.table import OPERATIONS

DECISIONS = ("approve", "reject")


class ApprovalScreens(SagaScreens):
    def get_urls(self) -> list[URLPattern]:
        return [
            self.url("approvals/", self.queue_view, "sagas_saga_approvals"),
            self.url("approvals/decide/", self.decide_view, "sagas_saga_decide"),
        ]

    def queue_view(self, request: HttpRequest) -> HttpResponse:
        principal = self.principal(request)
        items = queues.approval_queue(actor=principal)
        template = "admin/sagas/saga/approvals.html"
        return self.saga_page(request, principal, template, "Approval queue", items=items, limit=queues.QUEUE_LIMIT)

    def decide_view(self, request: HttpRequest) -> HttpResponse:
        """GET: the nodes named by `node`, each with what the approver judges. POST: decide them."""
        principal = self.principal(request)
        data = request.POST if request.method == "POST" else request.GET
        decision = data.get("decision")
        if decision not in DECISIONS:
            raise Http404("decision must be approve or reject")
        nodes = self.found(lambda: queues.tenant_nodes(actor=principal, node_ids=data.getlist("node")))
        if request.method != "POST":
            title = f"{decision.capitalize()} {len(nodes)} node(s)"
            rows = queues.decisions(nodes)
            return self.saga_page(
                request,
                principal,
                "admin/sagas/saga/decide.html",
                title,
                rows=rows,
                decision=decision,
                next=data.get("next"),
            )
        decided = self._decide(request, principal, nodes, approved=decision == "approve")
        if decided and decision == "approve" and request.POST.get("run_ready"):
            for saga_id in dict.fromkeys(n.saga_id for n in decided):
                self.act(request, partial(run_ready, principal, saga_id))
        return self.back(request, reverse("admin:sagas_saga_approvals"))

    @staticmethod
    def _decide(request: HttpRequest, principal: Principal, nodes: list[Node], *, approved: bool) -> list[Node]:
        reason = request.POST.get("reason", "").strip() or None
        decided = []
        for node in nodes:
            try:
                arguments = {"saga_id": str(node.saga_id), "node_id": str(node.id), "reason": reason}
                invoke(OPERATIONS["approve_saga_step"], principal, {**arguments, "approved": approved})
            except ServiceError as error:
                messages.error(request, f"Node {node.key or node.id}: {error.message}")
            else:
                decided.append(node)
        if decided:
            verb = "Approved" if approved else "Rejected"
            names = ", ".join(n.key or str(n.id) for n in decided)
            messages.success(request, f"{verb} {len(decided)} node(s): {names}.")
        return decided
