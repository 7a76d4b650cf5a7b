"""The base of every refusal Semantic Saga answers with: a stable code and a message written for the caller.

`sagas.errors.SagaError` derives from it, so a surface maps one class (ServiceError) to its in-band error.
"""

from __future__ import annotations

from typing import Any


class ServiceError(Exception):
    code = "SERVICE_ERROR"

    def __init__(self, code: str | None = None, message: str = "", **extra: Any) -> None:
        self.code = code or self.code
        self.message = message
        self.extra = extra
        super().__init__(f"{self.code}: {message}")

    def as_dict(self) -> dict[str, Any]:
        return {"code": self.code, "message": self.message, **self.extra}


class Forbidden(ServiceError):
    """Authenticated, but this principal's roles and scopes do not grant the operation."""

    code = "FORBIDDEN"


class AuthenticationFailed(ServiceError):
    """No identity could be established. `challenge` is the WWW-Authenticate value for HTTP surfaces."""

    code = "UNAUTHENTICATED"

    def __init__(self, message: str, *, error: str = "invalid_token", challenge: str | None = None) -> None:
        super().__init__(self.code, message)
        self.error = error
        self.challenge = challenge or f'Bearer error="{error}", error_description="{_quote(message)}"'


def _quote(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', "'")
