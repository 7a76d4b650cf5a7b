"""Bearer authentication in front of an HTTP protocol app: one Principal per request, or a 401 challenge.

The principal is also handed to the MCP SDK the way its own auth middleware would (`scope["user"]`), so the SDK binds
every stateful session to the tenant and principal that opened it: another principal (of any tenant) presenting
that `Mcp-Session-Id` is answered 404 "Session not found", exactly like an unknown id, and cannot use or DELETE it.
"""

from __future__ import annotations

import contextvars
import json

from asgiref.sync import sync_to_async
from django.conf import settings
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from starlette.types import ASGIApp, Receive, Scope, Send

from audit import telemetry
from governance.errors import AuthenticationFailed
from governance.identity.authentication import authenticate, authenticate_now, resource_metadata_served
from governance.identity.principal import Principal

current_principal: contextvars.ContextVar[Principal | None] = contextvars.ContextVar("current_principal", default=None)


class BearerAuth:
    """Authenticates every HTTP request (governance.identity.authentication) before the protocol app sees it."""

    def __init__(self, app: ASGIApp, *, protocol: str, resource_path: str) -> None:
        self.app = app
        self.protocol = protocol
        self.resource_path = resource_path

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        header = _header(scope, b"authorization")
        try:
            principal = authenticate_now(header, protocol=self.protocol)
            if principal is None:  # a JWKS fetch may block on the network: keep it off the event loop
                principal = await sync_to_async(authenticate, thread_sensitive=False)(header, protocol=self.protocol)
        except AuthenticationFailed as refusal:
            await self._challenge(refusal, send)
            return
        scope["user"] = session_owner(principal)
        token = current_principal.set(principal)
        # W3C trace context from the request headers (MCP `_meta` may override it per call).
        w3c = {key: value for key in telemetry.W3C_KEYS if (value := _header(scope, key.encode()))}
        try:
            with telemetry.attached(w3c):
                await self.app(scope, receive, send)
        finally:
            current_principal.reset(token)

    async def _challenge(self, refusal: AuthenticationFailed, send: Send) -> None:
        challenge = refusal.challenge
        if resource_metadata_served():
            metadata = (
                f"{settings.SAGA_PUBLIC_URL.rstrip('/')}/.well-known/oauth-protected-resource{self.resource_path}"
            )
            challenge += f', resource_metadata="{metadata}"'
        body = json.dumps({"error": refusal.error, "error_description": refusal.message}).encode()
        headers: list[tuple[bytes, bytes]] = [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
            (b"www-authenticate", challenge.encode()),
        ]
        # A valid token without a required scope is 403, as RFC 6750 (and the MCP SDK) answer insufficient_scope.
        status = 403 if refusal.error == "insufficient_scope" else 401
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})


def session_owner(principal: Principal) -> AuthenticatedUser:
    """The principal as the MCP SDK identifies a session's owner: (client_id, issuer, subject) = (tenant, our
    issuer, principal id). No credential is kept: the SDK compares identities, never tokens."""
    identity = AccessToken(
        token="",
        client_id=principal.tenant_id,
        scopes=sorted(principal.scopes),
        subject=principal.principal_id,
        claims={"iss": "semantic-saga"},
    )
    return AuthenticatedUser(identity)


def _header(scope: Scope, name: bytes) -> str | None:
    headers: list[tuple[bytes, bytes]] = scope.get("headers", [])
    for key, value in headers:
        if key.lower() == name:
            return value.decode("latin-1")
    return None


def request_principal() -> Principal:
    principal = current_principal.get()
    if principal is None:  # only reachable if the app were mounted without BearerAuth
        raise AuthenticationFailed("No authenticated principal for this request.")
    return principal
