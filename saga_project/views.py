from __future__ import annotations

from django.db import connection
from django.http import HttpRequest, JsonResponse


def healthz(request: HttpRequest) -> JsonResponse:
    """Liveness plus a database round trip: a node that cannot reach its database is not healthy."""
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
    except Exception as exc:  # the probe must answer, not crash, when the database is down
        return JsonResponse({"status": "unhealthy", "database": type(exc).__name__}, status=503)
    return JsonResponse({"status": "ok", "database": connection.vendor})


def protected_resource_metadata(request: HttpRequest) -> JsonResponse:
    """RFC 9728 metadata for the MCP endpoint: which authorization server issues its tokens (JWT mode only)."""
    from django.conf import settings

    from governance.auth import protected_resource_metadata as metadata

    if settings.SAGA_AUTH_MODE != "jwt":
        return JsonResponse(
            {"error": "not_found", "error_description": "No OAuth authorization server: SAGA_AUTH_MODE is not jwt."},
            status=404,
        )
    return JsonResponse(metadata("/mcp"))
