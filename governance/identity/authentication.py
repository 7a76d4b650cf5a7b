"""Authentication for every remote surface: one call, an Authorization header in, a Principal out."""

from __future__ import annotations

import sys
from urllib.parse import urlsplit

from django.conf import settings

from governance.errors import AuthenticationFailed
from governance.identity.listening import declared_host
from governance.identity.principal import Principal
from governance.identity.tokens import JWTVerifier, StaticTokenVerifier, TokenVerifier

ANONYMOUS_PRINCIPAL_ID = "anonymous-local"

_verifiers: dict[tuple[object, ...], TokenVerifier] = {}


def anonymous_principal(protocol: str) -> Principal:
    """SAGA_AUTH_MODE=none: whoever reaches a loopback server is the local admin of the default tenant."""
    return Principal(
        principal_id=ANONYMOUS_PRINCIPAL_ID,
        tenant_id=settings.SAGA_DEFAULT_TENANT,
        principal_type="user",
        roles=frozenset({"admin"}),
        authenticated=False,
        protocol=protocol,
    )


def token_verifier() -> TokenVerifier | None:
    """The verifier for SAGA_AUTH_MODE (None for mode none), built once per configuration."""
    mode = settings.SAGA_AUTH_MODE
    if mode == "none":
        return None
    # Keyed by the whole configuration, so a changed setting (tests, reloads) never reuses a stale verifier.
    key = (
        mode,
        settings.SAGA_AUTH_STATIC_TOKENS,
        settings.SAGA_JWT_ISSUER,
        settings.SAGA_JWT_AUDIENCE,
        settings.SAGA_JWT_JWKS_URL,
        tuple(settings.SAGA_JWT_ALGORITHMS),
        settings.SAGA_JWKS_MIN_REFRESH_SECONDS,
        # A seed-format token file reads its tenant, roles and type through the claim settings; a short token is
        # accepted or refused by where the server listens.
        tuple(settings.SAGA_JWT_TENANT_CLAIMS),
        settings.SAGA_JWT_ROLES_CLAIM,
        settings.SAGA_JWT_PRINCIPAL_TYPE_CLAIM,
        settings.SAGA_JWT_ALLOW_MISSING_TENANT,
        declared_host(),
    )
    if key not in _verifiers:
        _verifiers[key] = StaticTokenVerifier(settings.SAGA_AUTH_STATIC_TOKENS) if mode == "static" else JWTVerifier()
        _warn_of_expired_tokens(_verifiers[key])
    return _verifiers[key]


def _warn_of_expired_tokens(verifier: TokenVerifier) -> None:
    """Once, when the token file is read (at start for every serving command): entries already past expires_at.
    They load (the file may be shared with a clock that differs), and every request with them is refused."""
    expired = verifier.expired_tokens if isinstance(verifier, StaticTokenVerifier) else []
    if expired:
        sys.stderr.write(
            f"WARNING: {len(expired)} static token(s) already expired (expires_at has passed): {'; '.join(expired)}. "
            "Every request with them is refused; give the entries a later expires_at or remove them.\n"
        )


def authenticate(authorization: str | None, *, protocol: str) -> Principal:
    """Raises AuthenticationFailed (with a WWW-Authenticate challenge) when a token is required and is missing,
    malformed or invalid. In mode none every caller is the anonymous local admin. May block (a JWKS fetch)."""
    verifier = token_verifier()
    if verifier is None:
        return anonymous_principal(protocol)
    return _with_required_scopes(verifier.verify(_bearer_token(authorization), protocol=protocol))


def authenticate_now(authorization: str | None, *, protocol: str) -> Principal | None:
    """`authenticate` when it can answer without blocking (mode none, a static token, a JWT verified a moment
    ago), else None: call `authenticate` off the event loop. Raises AuthenticationFailed as it does."""
    verifier = token_verifier()
    if verifier is None:
        return anonymous_principal(protocol)
    principal = verifier.verify_now(_bearer_token(authorization), protocol=protocol)
    return None if principal is None else _with_required_scopes(principal)


def _with_required_scopes(principal: Principal) -> Principal:
    """SAGA_AUTH_REQUIRED_SCOPES (semantic-saga-mcp's --auth-required-scope): every one must be on the token, as the
    MCP SDK's own auth middleware requires, before RBAC looks at roles and our scopes."""
    missing = [scope for scope in settings.SAGA_AUTH_REQUIRED_SCOPES if scope not in principal.scopes]
    if missing:
        raise AuthenticationFailed(
            f"The token lacks the scope(s) this server requires of every token: {', '.join(missing)}. Ask for a token "
            "carrying them.",
            error="insufficient_scope",
        )
    return principal


def _bearer_token(authorization: str | None) -> str:
    scheme, _, token = (authorization or "").strip().partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise AuthenticationFailed(
            "Authentication required: send the header 'Authorization: Bearer <access token>'.",
            error="invalid_request" if authorization else "invalid_token",
        )
    return token.strip()


def resource_metadata_served() -> bool:
    """Protected-resource metadata is served whenever tokens are checked (mode static or jwt) and an issuer is
    configured, as semantic-saga-mcp served it with --auth-issuer in both its static and jwt modes. In mode none it
    is not: the seed built no auth settings there either, and metadata sending clients to an authorization server
    for tokens nobody checks would only mislead them (`semantic-saga check` warns of the unused issuer, saga.W013)."""
    return settings.SAGA_AUTH_MODE != "none" and bool(settings.SAGA_JWT_ISSUER)


def no_resource_metadata_reason() -> str:
    """Why /.well-known/oauth-protected-resource/... answers 404, for the current configuration."""
    if settings.SAGA_JWT_ISSUER:
        return (
            f"No protected-resource metadata: SAGA_JWT_ISSUER is {settings.SAGA_JWT_ISSUER}, but SAGA_AUTH_MODE is "
            "none, so this server checks no tokens and names no authorization server. Set SAGA_AUTH_MODE=static or "
            "jwt (semantic-saga-mcp's --auth-mode) to publish it."
        )
    if settings.SAGA_AUTH_MODE == "none":
        return (
            "No protected-resource metadata: this server checks no tokens (SAGA_AUTH_MODE=none). Set SAGA_AUTH_MODE "
            "static or jwt and SAGA_JWT_ISSUER (semantic-saga-mcp's --auth-mode and --auth-issuer) to publish it."
        )
    return (
        "No OAuth authorization server is configured: set SAGA_JWT_ISSUER (semantic-saga-mcp's --auth-issuer) to "
        "name the one that issues this server's tokens."
    )


def __getattr__(name: str) -> str:
    """NO_RESOURCE_METADATA, which the metadata views import when they answer, is worked out for the configuration
    of the moment (no_resource_metadata_reason) rather than fixed at import."""
    if name == "NO_RESOURCE_METADATA":
        return no_resource_metadata_reason()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def protected_resource_metadata(resource_path: str = "/mcp") -> dict[str, object]:
    """RFC 9728 metadata for a protected endpoint: which authorization server issues tokens for it."""
    from governance.identity.rbac import SCOPE_CAPABILITIES

    return {
        "resource": settings.SAGA_PUBLIC_URL.rstrip("/") + resource_path,
        "authorization_servers": [_issuer_identifier(settings.SAGA_JWT_ISSUER)],
        "bearer_methods_supported": ["header"],
        "scopes_supported": sorted({*SCOPE_CAPABILITIES, *settings.SAGA_AUTH_REQUIRED_SCOPES}),
        "resource_name": "Semantic Saga",
    }


def _issuer_identifier(issuer: str) -> str:
    """An issuer with no path gets "/", as the MCP SDK writes it (pydantic's URL form): semantic-saga-mcp served
    https://auth.example.com/ for --auth-issuer https://auth.example.com, and its clients and scripts expect that."""
    parts = urlsplit(issuer)
    return issuer + "/" if parts.netloc and not parts.path else issuer
