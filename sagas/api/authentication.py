"""Who is calling the REST API: the same Principal as MCP and A2A, from a bearer token or a console session.

- `Authorization: Bearer <token>` goes through governance.identity.authentication (static or JWT verification),
  exactly as /mcp and /a2a do; a refused token answers 401 with the verifier's WWW-Authenticate challenge.
- A logged-in console user (the browsable API from the admin) acts as governance.identity.operators.principal_for_user
  says: same tenant and role as in the admin. DRF's SessionAuthentication keeps CSRF on for unsafe methods.
- SAGA_AUTH_MODE=none: a caller with neither is the anonymous local admin, as on every other surface.

Bearer comes first, so an explicit token wins over a session cookie sent along by a browser.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from django.conf import settings
from rest_framework import exceptions
from rest_framework.authentication import BaseAuthentication, SessionAuthentication
from rest_framework.permissions import BasePermission
from rest_framework.request import Request

from governance.errors import AuthenticationFailed
from governance.identity.authentication import anonymous_principal, authenticate
from governance.identity.operators import principal_for_user
from governance.identity.principal import Principal

if TYPE_CHECKING:  # rest_framework.views imports the authentication classes named in settings
    from rest_framework.views import APIView

PROTOCOL = "rest"
CHALLENGE = 'Bearer realm="semantic-saga"'
AUTHENTICATION_REQUIRED = (
    "Authentication required: send the header 'Authorization: Bearer <access token>' (or log into the admin "
    "console and use the browsable API). Nothing was read or changed."
)


class TokenUser:
    """request.user for a bearer-token caller: enough of Django's user interface for DRF and its templates."""

    is_authenticated = True
    is_anonymous = False
    is_active = True
    is_staff = False
    is_superuser = False

    def __init__(self, principal: Principal) -> None:
        self.principal = principal
        self.username = principal.principal_id

    def get_username(self) -> str:
        return self.username

    def __str__(self) -> str:
        return self.username


class BearerTokenRefused(exceptions.AuthenticationFailed):
    """A token was sent and refused: carries the verifier's message and WWW-Authenticate challenge."""

    def __init__(self, refusal: AuthenticationFailed) -> None:
        super().__init__(detail=refusal.message, code=refusal.code)
        self.refusal = refusal


class BearerTokenAuthentication(BaseAuthentication):
    def authenticate(self, request: Request) -> tuple[Any, Any] | None:
        header = request.META.get("HTTP_AUTHORIZATION")
        if not header:
            return None  # the session may still identify the caller; no identity at all answers 401 later
        try:
            principal = authenticate(header, protocol=PROTOCOL)
        except AuthenticationFailed as refusal:
            raise BearerTokenRefused(refusal) from refusal
        return TokenUser(principal), principal

    def authenticate_header(self, request: Request) -> str:
        return CHALLENGE


class ConsoleSessionAuthentication(SessionAuthentication):
    """A logged-in admin console user, with CSRF enforced on unsafe methods by DRF."""

    def authenticate(self, request: Request) -> tuple[Any, Any] | None:
        found = super().authenticate(request)
        if found is None:
            return None
        user = found[0]
        principal = principal_for_user(user)
        if principal is None:
            raise exceptions.PermissionDenied(
                f"The console account {user.get_username()!r} is not assigned to a tenant, so it may see nothing. "
                "Ask an admin to give it a profile (tenant and role), or call with a bearer token."
            )
        return user, dataclasses.replace(principal, protocol=PROTOCOL)


class PrincipalRequired(BasePermission):
    """Every endpoint needs a Principal (RBAC per operation is checked by the view and again by the coordinator)."""

    def has_permission(self, request: Request, view: APIView) -> bool:
        return isinstance(request.auth, Principal) or settings.SAGA_AUTH_MODE == "none"


def request_principal(request: Request) -> Principal:
    """The caller's Principal; PrincipalRequired has already refused requests without one."""
    if isinstance(request.auth, Principal):
        return request.auth
    if settings.SAGA_AUTH_MODE == "none":
        return anonymous_principal(PROTOCOL)
    raise exceptions.NotAuthenticated(AUTHENTICATION_REQUIRED)
