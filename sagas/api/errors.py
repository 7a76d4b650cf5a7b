"""The REST boundary's one mapping of refusals to HTTP: `{"error": {"code", "message", ...}}` with a fitting status.

Every ServiceError (the coordinator's, RBAC's, authentication's) keeps the stable code and the message written for
the caller that MCP and A2A answer with; only the HTTP status is added here. DRF's own refusals (bad JSON, wrong
media type, unknown method) get the same body. Anything else is a bug or an outage: logged, answered 500 with the
error type only.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from rest_framework import exceptions, status
from rest_framework.response import Response

from governance.errors import AuthenticationFailed, Forbidden, ServiceError
from sagas.api.authentication import AUTHENTICATION_REQUIRED, BearerTokenRefused
from sagas.errors import (
    ActionFailedPermanent,
    ActionFailedTransient,
    ApprovalRequired,
    InvalidInput,
    InvalidTransition,
    NotFound,
    SagaError,
    StaleState,
)

logger = logging.getLogger("sagas.api")

# Codes whose status differs from their class's.
CODE_STATUS: dict[str, int] = {
    # Tenant policy said no: retrying will not help until the policy changes (an authorization decision).
    "POLICY_DENIED": status.HTTP_403_FORBIDDEN,
    # A kill switch is a temporary state of the tenant or saga: the same request may succeed once released.
    "KILL_SWITCH_ENGAGED": status.HTTP_409_CONFLICT,
    # A configured quota: the same request may succeed later (retry_after_seconds says when, where known).
    "QUOTA_EXCEEDED": status.HTTP_429_TOO_MANY_REQUESTS,
    # The server's own policy file is broken: not the caller's fault, and nothing the caller can fix.
    "INVALID_POLICY_FILE": status.HTTP_503_SERVICE_UNAVAILABLE,
    "INVALID_INPUT": status.HTTP_400_BAD_REQUEST,
}

# First match wins: subclasses before their bases.
CLASS_STATUS: list[tuple[type[ServiceError], int]] = [
    (AuthenticationFailed, status.HTTP_401_UNAUTHORIZED),
    (Forbidden, status.HTTP_403_FORBIDDEN),
    (NotFound, status.HTTP_404_NOT_FOUND),
    (InvalidInput, status.HTTP_400_BAD_REQUEST),
    (InvalidTransition, status.HTTP_409_CONFLICT),
    (StaleState, status.HTTP_409_CONFLICT),
    (ApprovalRequired, status.HTTP_409_CONFLICT),
    # The action ran and failed (the saga has reacted, see error.saga_status). A 4xx on purpose: repeating the
    # request would journal a new step, so clients and proxies must not retry it as if the server had faltered.
    (ActionFailedPermanent, status.HTTP_422_UNPROCESSABLE_ENTITY),
    (ActionFailedTransient, status.HTTP_422_UNPROCESSABLE_ENTITY),
    # Any other domain refusal is about the saga's current state (unfinished nodes, uncertain outcome, ...).
    (SagaError, status.HTTP_409_CONFLICT),
]

DRF_CODES: dict[type[exceptions.APIException], tuple[str, str]] = {
    exceptions.ParseError: (
        "INVALID_JSON",
        "The request body is not valid JSON ({detail}). Nothing was done. Send one JSON object with "
        "'Content-Type: application/json'.",
    ),
    exceptions.UnsupportedMediaType: (
        "UNSUPPORTED_MEDIA_TYPE",
        "{detail}. Nothing was done. Send the body as JSON with 'Content-Type: application/json'.",
    ),
    exceptions.MethodNotAllowed: (
        "METHOD_NOT_ALLOWED",
        "{detail}. The Allow header lists the methods this URL accepts; /api/v1/docs/ describes every endpoint.",
    ),
    exceptions.NotAcceptable: ("NOT_ACCEPTABLE", "{detail}. Ask for application/json."),
    exceptions.NotAuthenticated: ("UNAUTHENTICATED", AUTHENTICATION_REQUIRED),
    exceptions.PermissionDenied: ("FORBIDDEN", "{detail}."),
    exceptions.NotFound: ("NOT_FOUND", "{detail}. /api/v1/docs/ lists the endpoints."),
}


def status_for(error: ServiceError) -> int:
    if error.code in CODE_STATUS:
        return CODE_STATUS[error.code]
    for cls, code in CLASS_STATUS:
        if isinstance(error, cls):
            return code
    return status.HTTP_400_BAD_REQUEST


def error_body(code: str, message: str, **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = json.loads(json.dumps({"code": code, "message": message, **extra}, default=str))
    return {"error": body}


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response:
    """DRF's EXCEPTION_HANDLER: every error the API answers passes through here."""
    if isinstance(exc, BearerTokenRefused):
        return _unauthenticated(exc.refusal)
    if isinstance(exc, AuthenticationFailed):
        return _unauthenticated(exc)
    if isinstance(exc, ServiceError):
        return Response(error_body(exc.code, exc.message, **exc.extra), status=status_for(exc))
    if isinstance(exc, exceptions.APIException):
        return _drf_refusal(exc)
    view = context.get("view")
    logger.exception("REST %s failed unexpectedly", type(view).__name__ if view else "request", exc_info=exc)
    return Response(
        error_body(
            "INTERNAL_ERROR",
            f"The request failed unexpectedly ({type(exc).__name__}). Read the saga (GET /api/v1/sagas/<id>/) "
            "before retrying: the request may or may not have changed it.",
        ),
        status=status.HTTP_500_INTERNAL_SERVER_ERROR,
    )


def _unauthenticated(refusal: AuthenticationFailed) -> Response:
    # A valid token without a scope SAGA_AUTH_REQUIRED_SCOPES requires is 403, as on /mcp and /a2a (RFC 6750).
    insufficient = refusal.error == "insufficient_scope"
    return Response(
        error_body(refusal.code, refusal.message),
        status=status.HTTP_403_FORBIDDEN if insufficient else status.HTTP_401_UNAUTHORIZED,
        headers={"WWW-Authenticate": refusal.challenge},
    )


def _drf_refusal(exc: exceptions.APIException) -> Response:
    detail = exc.detail if isinstance(exc.detail, str) else json.dumps(exc.detail, default=str)
    code, template = next(
        ((c, t) for cls, (c, t) in DRF_CODES.items() if isinstance(exc, cls)),
        (str(exc.default_code).upper(), "{detail}."),
    )
    headers: dict[str, str] = {}
    # DRF decided 401 vs 403 already: auth_header is set (on NotAuthenticated) only when a challenge applies.
    if auth_header := getattr(exc, "auth_header", None):
        headers["WWW-Authenticate"] = auth_header
    return Response(
        error_body(code, template.format(detail=str(detail).rstrip("."))),
        status=exc.status_code,
        headers=headers,
    )
