"""Reviewing a changed or new downstream tool (/admin/registry/toolpin/<pk>/review/): what the server lists now
beside the definition this deployment trusts, and, for an operator, the decision to trust exactly the definition
shown (registry.tool_pins.accept with its hash; one listed since is not accepted with it). Until then every call
of the tool is held with this difference in front of a person.
"""

from __future__ import annotations

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import URLPattern, reverse

from governance.errors import ServiceError
from governance.identity.rbac import DECIDE, can
from registry.models import ToolPin
from registry.tool_pins import accept, definition_text, pin_state
from sagas.console.screens.base import ConsoleScreens


class ToolPinScreens(ConsoleScreens):
    model = ToolPin

    def get_urls(self) -> list[URLPattern]:
        return [self.url("<int:pk>/review/", self.review_view, "registry_toolpin_review")]

    def review_view(self, request: HttpRequest, pk: int) -> HttpResponse:
        principal = self.principal(request)
        pin = ToolPin.objects.filter(pk=pk).first()
        if pin is None:
            raise Http404("No such tool pin.")
        if request.method == "POST":
            try:
                # The definition the page showed (its hash, sent back with the form): if the server lists another
                # one by now, nothing is accepted and the page shows the new difference.
                reviewed = str(request.POST.get("reviewed_hash", ""))
                accept(actor=principal, server=pin.server, tool=pin.tool, reviewed_hash=reviewed)
            except ServiceError as error:
                messages.error(request, error.message)
                if error.code == "TOOL_DEFINITION_MOVED":
                    return HttpResponseRedirect(reverse("admin:registry_toolpin_review", args=[pin.pk]))
            else:
                messages.success(
                    request, f"{pin.server}/{pin.tool}: its definition is trusted now; its calls flow by their gate."
                )
            return HttpResponseRedirect(reverse("admin:registry_toolpin_changelist"))
        return self.page(
            request,
            "admin/registry/toolpin/review.html",
            f"Review {pin.server}/{pin.tool}",
            pin=pin,
            changes=pin_state(pin).changes,
            pinned=definition_text(pin.pinned_definition) if pin.pinned_definition else "",
            seen=definition_text(pin.seen_definition),
            can_accept=can(principal, DECIDE) and pin.status != "approved",
        )
