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
