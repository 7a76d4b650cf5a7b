from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import connection
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.views.decorators.http import require_safe


@dataclass(frozen=True)
class Endpoint:
    name: str
    path: str
    description: str


# What a served instance offers, in the order a new user needs it (the landing page and its JSON index).
ENDPOINTS = (
    Endpoint("console", "/admin/", "Operator console: approval queue, recovery, sagas with their workflow DAG"),
    Endpoint("mcp", "/mcp", "MCP over Streamable HTTP: point an MCP client (Claude, an agent SDK) here"),
    Endpoint("a2a", "/a2a", "A2A 1.0 JSON-RPC for peer agents"),
    Endpoint("agent_card", "/.well-known/agent-card.json", "The public A2A agent card: skills and how to call them"),
    Endpoint("rest_api", "/api/v1/docs/", "REST API for scripts and services (Swagger UI; schema at /api/v1/schema/)"),
    Endpoint("health", "/healthz", "Liveness with a database round trip"),
)
CREATE_OPERATOR_COMMAND = ".venv/bin/semantic-saga createsuperuser"


@require_safe
def landing(request: HttpRequest) -> HttpResponse:
    """`GET /`: a short page naming every surface for a browser, the same as a JSON index for a JSON client."""
    needs_operator = not get_user_model().objects.filter(is_superuser=True).exists()
    if request.get_preferred_type(["text/html", "application/json"]) == "application/json":
        return JsonResponse(_index(needs_operator))
    context = {"endpoints": ENDPOINTS, "auth_mode": settings.SAGA_AUTH_MODE, "needs_operator": needs_operator}
    return render(request, "landing.html", {**context, "create_operator": CREATE_OPERATOR_COMMAND})


def _index(needs_operator: bool) -> dict[str, object]:
    base = settings.SAGA_PUBLIC_URL.rstrip("/")
    return {
        "service": "Semantic Saga",
        "auth_mode": settings.SAGA_AUTH_MODE,
        "endpoints": {e.name: {"path": e.path, "url": base + e.path, "description": e.description} for e in ENDPOINTS},
        # First run: the console needs an account before anyone can log in.
        "create_operator": CREATE_OPERATOR_COMMAND if needs_operator else None,
    }


def healthz(request: HttpRequest) -> JsonResponse:
    """Liveness plus a database round trip: a node that cannot reach its database is not healthy."""
    try:
        connection.ensure_connection()
        if not connection.is_usable():  # the backend's own probe: a SELECT 1 round trip on PostgreSQL
            raise ConnectionError("the database connection is not usable")
    except Exception as exc:  # the probe must answer, not crash, when the database is down
        return JsonResponse({"status": "unhealthy", "database": type(exc).__name__}, status=503)
    return JsonResponse({"status": "ok", "database": connection.vendor})


def protected_resource_metadata(request: HttpRequest) -> JsonResponse:
    """RFC 9728 metadata for the MCP endpoint: which authorization server issues its tokens (whenever tokens are
    checked and SAGA_JWT_ISSUER is set)."""
    from governance.identity.authentication import NO_RESOURCE_METADATA, resource_metadata_served
    from governance.identity.authentication import protected_resource_metadata as metadata

    if not resource_metadata_served():
        return JsonResponse({"error": "not_found", "error_description": NO_RESOURCE_METADATA}, status=404)
    return JsonResponse(metadata("/mcp"))
