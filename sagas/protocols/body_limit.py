"""SAGA_MAX_REQUEST_BYTES for the HTTP surfaces that have no limit of their own (the Django part of `serve`:
/api/v1 and the console; and /a2a): a body declared bigger is refused with 413 before it is read, one sent without
a length (or with a false one) once it passes the limit. Django's ASGI handler would otherwise spool any body to a
temporary file before a view could refuse it (issue 20: a REST request declaring 2 GiB was read until the client
gave up). Each surface says it in its own error shape (`refusal`); the MCP SDK limits /mcp itself."""

from __future__ import annotations

import json
from collections.abc import Callable

from mcp.server.transport_security import RequestBodyLimitMiddleware
from starlette.datastructures import Headers
from starlette.responses import Response
from starlette.types import ASGIApp, Receive, Scope, Send

# (declared Content-Length, or "" when unknown; the limit) -> the 413 answer in the surface's own error shape.
Refusal = Callable[[str, int], Response]


def too_large(declared: str, limit: int) -> Response:
    size = f"{declared} bytes" if declared else "bigger than that"
    error = {
        "code": "REQUEST_TOO_LARGE",
        "message": f"The request body is {size}; this server accepts at most {limit} bytes (SAGA_MAX_REQUEST_BYTES). "
        "Nothing was read or created: send a smaller request.",
    }
    return Response(json.dumps({"error": error}), status_code=413, media_type="application/json")


class BodyLimit:
    def __init__(self, app: ASGIApp, limit: int, refusal: Refusal = too_large) -> None:
        self.app = app
        self.limit = limit
        self.refusal = refusal
        # Counts what arrives, for a body without a (truthful) length; its own 413 is plain text, so ours comes first
        # whenever the length is declared.
        self.counted = RequestBodyLimitMiddleware(app, limit)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = Headers(scope=scope).get("content-length", "")
        if declared.isdigit() and int(declared) > self.limit:
            await self.refusal(declared, self.limit)(scope, receive, send)
            return
        await self.counted(scope, receive, send)
