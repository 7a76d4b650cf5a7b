"""Bearer token verification: a static token file for development and CI, or OAuth/OIDC JWT access tokens.

Both produce a Principal or raise AuthenticationFailed with a message saying what was wrong.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import httpx
import jwt
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from governance.errors import AuthenticationFailed
from governance.identity.claims import claimed_tenant, principal_kind, role_names, tenant_claims
from governance.identity.listening import declared_host, loopback_only
from governance.identity.principal import Principal
from governance.identity.seed_tokens import is_seed_document, seed_entry
from governance.identity.verified_tokens import VerifiedTokens

# JWKS fetches wait at most this long: a slow identity provider must not hold requests hostage.
JWKS_TIMEOUT_SECONDS = 5.0


@runtime_checkable
class TokenVerifier(Protocol):
    def verify(self, token: str, *, protocol: str) -> Principal: ...

    def verify_now(self, token: str, *, protocol: str) -> Principal | None:
        """`verify` when it needs no network (no JWKS fetch), else None: the caller verifies on a worker thread."""
        ...


def _string_list(value: Any) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [part for part in value.replace(",", " ").split() if part]
    if isinstance(value, list | tuple):
        return [str(part) for part in value]
    return []


# --- static -------------------------------------------------------------------------------------------------------


# Tokens shorter than this are refused unless the server listens on loopback only (governance.identity.listening):
# semantic-saga-mcp's CI files use 10 to 14 characters, guessable by anyone who can reach the port.
MIN_TOKEN_LENGTH = 16


@dataclass(frozen=True)
class _StaticEntry:
    principal_id: str
    tenant_id: str
    principal_type: str
    roles: frozenset[str]
    scopes: frozenset[str]
    expires_at: float | None = None


class StaticTokenVerifier:
    """`{"tokens": {"<token>": {"principal_id", "tenant_id", "roles", "scopes", "principal_type"}}}`, or
    semantic-saga-mcp's format as it is (governance.identity.seed_tokens).

    Tokens are kept only as SHA-256 digests and looked up by digest, so comparing does not leak token prefixes.
    `short_tokens` names the entries shorter than MIN_TOKEN_LENGTH, accepted because the server listens on loopback
    only (`serve` prints a warning naming them); anywhere else loading refuses them. `expired_tokens` names the
    entries whose expires_at has already passed when the file is read (the server warns at start; such a token is
    refused at every request). An entry is named by its place in the file and its principal, never by its token.
    Role names are compared lowercased (claims.role_names); roles and scopes must be lists in either format.
    """

    def __init__(self, path: str) -> None:
        self.short_tokens: list[str] = []
        self.expired_tokens: list[str] = []
        self._entries = self._load(Path(path))

    def _load(self, path: Path) -> dict[str, _StaticEntry]:
        try:
            document = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError as exc:
            raise ImproperlyConfigured(f"SAGA_AUTH_STATIC_TOKENS: {path} does not exist.") from exc
        except ValueError as exc:
            raise ImproperlyConfigured(f"SAGA_AUTH_STATIC_TOKENS: {path} is not valid JSON ({exc}).") from exc
        seed = is_seed_document(document)
        tokens = document if seed else document.get("tokens") if isinstance(document, dict) else None
        if not isinstance(tokens, dict) or not tokens:
            raise ImproperlyConfigured(
                f'SAGA_AUTH_STATIC_TOKENS: {path} needs a non-empty "tokens" object (or, in semantic-saga-mcp\'s '
                "format, an object mapping each token to its client_id, subject, scopes and claims)."
            )
        entries = {}
        for index, (token, spec) in enumerate(tokens.items()):
            where = f"{path}: tokens entry {index + 1}"
            fields = seed_entry(spec, where) if seed else _our_entry(spec, where)
            who = f"{where} ({fields['principal_id']})"
            if not token.strip() or token != token.strip():
                raise ImproperlyConfigured(
                    f"{who}: its token is {'empty' if not token.strip() else 'padded with white space'}. A bearer "
                    "token can never match it; give the entry a long random token."
                )
            if len(token) < MIN_TOKEN_LENGTH:
                self._short(f"{where} ({fields['principal_id']}, {len(token)} characters)")
            expires_at = fields.get("expires_at")
            if expires_at is not None and expires_at <= time.time():
                self.expired_tokens.append(who)
            entries[_digest(token)] = _StaticEntry(
                principal_id=str(fields["principal_id"]),
                tenant_id=str(fields["tenant_id"]),
                principal_type=str(fields.get("principal_type") or "user"),
                roles=role_names(_listed_names(fields.get("roles"), "roles", who)),
                scopes=frozenset(_listed_names(fields.get("scopes"), "scopes", who)),
                expires_at=expires_at,
            )
        return entries

    def _short(self, what: str) -> None:
        if loopback_only():
            self.short_tokens.append(what)
            return
        host = declared_host()
        where = f"listens on {host}" if host else "has not said it listens on loopback only (127.0.0.1, ::1)"
        raise ImproperlyConfigured(
            f"{what}: tokens must be at least {MIN_TOKEN_LENGTH} characters long. A shorter one (as in "
            f"semantic-saga-mcp's CI files) is accepted only by a server listening on loopback only, and this one "
            f"{where}: anyone who can reach it could guess the token."
        )

    def verify(self, token: str, *, protocol: str) -> Principal:
        entry = self._entries.get(_digest(token))
        if entry is None:
            raise AuthenticationFailed("The bearer token is not recognized. Check the token or ask for a new one.")
        if entry.expires_at is not None and entry.expires_at <= time.time():
            raise AuthenticationFailed("The token has expired (its expires_at has passed). Use another token.")
        return Principal(
            principal_id=entry.principal_id,
            tenant_id=entry.tenant_id,
            principal_type=entry.principal_type,
            roles=entry.roles,
            scopes=entry.scopes,
            authenticated=True,
            protocol=protocol,
        )

    def verify_now(self, token: str, *, protocol: str) -> Principal | None:
        return self.verify(token, protocol=protocol)  # a look-up in memory


def _listed_names(value: Any, field: str, who: str) -> list[str]:
    """A token file's roles or scopes: absent, or a list of names. A plain string is refused rather than split:
    `"roles": "operator admin"` could be one misspelled name or two, and the file is ours to read exactly."""
    if value is None:
        return []
    if isinstance(value, list) and all(isinstance(name, str) for name in value):
        return value
    if isinstance(value, str):
        example = json.dumps(value.replace(",", " ").split() or ["operator"])
        raise ImproperlyConfigured(
            f'{who}: "{field}" is the string {json.dumps(value)}; write a list of names: "{field}": {example}.'
        )
    raise ImproperlyConfigured(
        f'{who}: "{field}" must be a list of names such as ["operator"], not {type(value).__name__}.'
    )


def _our_entry(spec: Any, where: str) -> dict[str, Any]:
    if not isinstance(spec, dict) or not spec.get("principal_id") or not spec.get("tenant_id"):
        raise ImproperlyConfigured(f"{where} needs principal_id and tenant_id.")
    return {**spec, "expires_at": None}  # our format has no expiry: a token lives until it leaves the file


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


# --- JWT ----------------------------------------------------------------------------------------------------------


class JWKSCache:
    """The issuer's signing keys by kid: cached, refreshed when stale or when an unknown kid shows up (rotation),
    but at most once per `min_refresh` seconds."""

    def __init__(self, url: str, *, ttl: float, min_refresh: float) -> None:
        self.url = url
        self.ttl = ttl
        self.min_refresh = min_refresh
        self._keys: dict[str, jwt.PyJWK] = {}
        self._fetched_at = float("-inf")
        self._lock = threading.Lock()

    def key(self, kid: str) -> jwt.PyJWK:
        with self._lock:
            age = time.monotonic() - self._fetched_at
            if age > self.ttl or (kid not in self._keys and age > self.min_refresh):
                self._refresh()
            found = self._keys.get(kid)
        if found is None:
            raise AuthenticationFailed(f"The token's signing key (kid {kid!r}) is not published by the issuer.")
        return found

    def _refresh(self) -> None:
        try:
            answer = httpx.get(self.url, timeout=JWKS_TIMEOUT_SECONDS, follow_redirects=False)
            answer.raise_for_status()
            document = answer.json()
        except (httpx.HTTPError, ValueError) as exc:
            # Keep serving the keys we have; tokens signed with them still verify while the issuer is down.
            if not self._keys:
                raise AuthenticationFailed(
                    "The issuer's signing keys could not be fetched; the token cannot be checked. Try again later."
                ) from exc
            return
        keys = {}
        for item in document.get("keys", []) if isinstance(document, dict) else []:
            if not isinstance(item, dict) or "kid" not in item or item.get("use", "sig") != "sig":
                continue
            try:
                keys[str(item["kid"])] = jwt.PyJWK(item)
            except jwt.PyJWTError:
                continue  # an algorithm this build cannot use; other keys still count
        self._keys = keys
        self._fetched_at = time.monotonic()


class JWTVerifier:
    def __init__(self) -> None:
        self.issuer: str = settings.SAGA_JWT_ISSUER
        self.audience: str = settings.SAGA_JWT_AUDIENCE
        self.algorithms: list[str] = list(settings.SAGA_JWT_ALGORITHMS)
        self.jwks = JWKSCache(
            settings.SAGA_JWT_JWKS_URL,
            ttl=settings.SAGA_JWKS_CACHE_SECONDS,
            min_refresh=settings.SAGA_JWKS_MIN_REFRESH_SECONDS,
        )
        self.verified = VerifiedTokens()

    def verify(self, token: str, *, protocol: str) -> Principal:
        if (known := self.verified.get(token, protocol)) is not None:
            return known
        claims = self._claims(token)
        principal = principal_from_claims(claims, protocol=protocol)
        self.verified.put(token, protocol, principal, expires_at=float(claims["exp"]))
        return principal

    def verify_now(self, token: str, *, protocol: str) -> Principal | None:
        return self.verified.get(token, protocol)  # verifying anew may fetch the JWKS

    def _claims(self, token: str) -> dict[str, Any]:
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError as exc:
            raise AuthenticationFailed("The bearer token is not a well-formed JWT.") from exc
        alg = str(header.get("alg", ""))
        if alg not in self.algorithms:
            raise AuthenticationFailed(
                f"The token is signed with {alg or 'no algorithm'}; accepted: {', '.join(self.algorithms)}."
            )
        key = self.jwks.key(str(header.get("kid", "")))
        try:
            claims: dict[str, Any] = jwt.decode(
                token,
                key=key.key,
                algorithms=[alg],
                audience=self.audience,
                leeway=settings.SAGA_JWT_LEEWAY_SECONDS,
                options={"require": ["exp", "iss", "aud"], "strict_aud": False},
            )
        except jwt.ExpiredSignatureError as exc:
            raise AuthenticationFailed("The token has expired. Get a new access token.") from exc
        except jwt.InvalidAudienceError as exc:
            raise AuthenticationFailed(
                f"The token is not meant for this server (audience must be {self.audience})."
            ) from exc
        except jwt.PyJWTError as exc:
            raise AuthenticationFailed(f"The token is invalid: {exc}.") from exc
        if not same_issuer(claims["iss"], self.issuer):
            raise AuthenticationFailed(
                f"The token was issued by someone else (its iss is {str(claims['iss'])!r}; the issuer this server "
                f"accepts is {self.issuer}, with or without a final /)."
            )
        return claims


def same_issuer(claimed: Any, configured: str) -> bool:
    """`iss` against SAGA_JWT_ISSUER, final slashes aside: semantic-saga-mcp stripped the final / of --auth-issuer
    before comparing, and identity providers differ on writing one (`https://idp.example.com/` documented, tokens
    carrying `https://idp.example.com`). Anything else must match exactly."""
    return isinstance(claimed, str) and bool(claimed) and claimed.rstrip("/") == configured.rstrip("/")


def principal_from_claims(claims: Mapping[str, Any], *, protocol: str) -> Principal:
    """Map verified token (or OIDC) claims to a Principal, with the configured claim names."""
    subject = claims.get("sub") or claims.get("client_id")
    if not subject:
        raise AuthenticationFailed("The token names no principal: it has neither sub nor client_id.")
    tenant = claimed_tenant(claims)
    if tenant is None:
        raise AuthenticationFailed(
            f"The token carries no tenant claim ({tenant_claims()}); every request must belong to a tenant. Ask "
            "your identity provider to add one."
        )
    scopes = _string_list(claims.get("scope")) + _string_list(claims.get("scp"))
    return Principal(
        principal_id=str(subject),
        tenant_id=tenant,
        principal_type=principal_kind(claims, has_subject=bool(claims.get("sub"))),
        roles=role_names(_string_list(claims.get(settings.SAGA_JWT_ROLES_CLAIM))),
        scopes=frozenset(scopes),
        authenticated=True,
        protocol=protocol,
    )
