"""JWT access tokens: real RS256/ES256 signatures checked against a JWKS served over real local HTTP."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives import serialization

from governance.errors import AuthenticationFailed
from governance.identity.authentication import authenticate
from governance.identity.tokens import JWKSCache
from tests.governance.jwks import AUDIENCE, ISSUER, JWKSServer, SigningKey


@pytest.fixture(scope="module")
def keys() -> dict[str, SigningKey]:
    return {"rsa": SigningKey("rsa-1", "RS256"), "ec": SigningKey("ec-1", "ES256"), "next": SigningKey("rsa-2")}


@pytest.fixture(scope="module")
def jwks_server(keys: dict[str, SigningKey]) -> Iterator[JWKSServer]:
    server = JWKSServer()
    yield server
    server.stop()


@pytest.fixture
def jwks(jwks_server: JWKSServer, keys: dict[str, SigningKey], settings: Any) -> JWKSServer:
    jwks_server.keys = [keys["rsa"], keys["ec"]]
    jwks_server.fetches = 0
    settings.SAGA_AUTH_MODE = "jwt"
    settings.SAGA_JWT_ISSUER = ISSUER
    settings.SAGA_JWT_AUDIENCE = AUDIENCE
    settings.SAGA_JWT_JWKS_URL = jwks_server.url
    settings.SAGA_JWKS_MIN_REFRESH_SECONDS = 0.0
    return jwks_server


def _auth(token: str) -> Any:
    return authenticate(f"Bearer {token}", protocol="test")


def _refused(token: str, *words: str) -> None:
    with pytest.raises(AuthenticationFailed) as refused:
        _auth(token)
    for word in words:
        assert word in refused.value.message
    assert refused.value.challenge.startswith('Bearer error="invalid_token"')


@pytest.mark.parametrize("key", ["rsa", "ec"])
def test_valid_token_becomes_a_principal(jwks: JWKSServer, keys: dict[str, SigningKey], key: str):
    principal = _auth(keys[key].sign(scope="semantic-saga:read semantic-saga:execute", principal_type="agent"))
    assert (principal.principal_id, principal.tenant_id, principal.principal_type) == ("alice", "acme", "agent")
    assert principal.roles == {"operator"} and principal.scopes == {"semantic-saga:read", "semantic-saga:execute"}
    assert principal.authenticated and principal.protocol == "test"


def test_wrong_audience_is_refused(jwks: JWKSServer, keys: dict[str, SigningKey]):
    _refused(keys["rsa"].sign(aud="another-service"), "audience")


@pytest.mark.parametrize("issuer", ["https://evil.example.test/realms/acme", ISSUER.upper(), ISSUER + "/x"])
def test_issuer_must_match_but_for_a_final_slash(jwks: JWKSServer, keys: dict[str, SigningKey], issuer: str):
    _refused(keys["rsa"].sign(iss=issuer), "issuer", ISSUER)
    assert _auth(keys["rsa"].sign(iss=ISSUER + "/")).principal_id == "alice"  # as semantic-saga-mcp compared it


def test_expired_token_is_refused(jwks: JWKSServer, keys: dict[str, SigningKey]):
    _refused(keys["rsa"].sign(iat=1_600_000_000, exp=1_600_000_300), "expired")


def test_unknown_kid_is_refused_until_the_issuer_publishes_it(jwks: JWKSServer, keys: dict[str, SigningKey]):
    # given a token signed with a key the issuer has not published yet
    rotated = keys["next"].sign()
    _refused(rotated, "rsa-2")
    # when the issuer rotates its keys
    jwks.keys = [keys["next"]]
    # then the unknown kid triggers a refresh and the token verifies
    assert _auth(rotated).principal_id == "alice"


def test_unknown_kids_do_not_turn_into_a_fetch_flood(jwks: JWKSServer, keys: dict[str, SigningKey], settings: Any):
    settings.SAGA_JWKS_MIN_REFRESH_SECONDS = 60.0
    assert _auth(keys["rsa"].sign()).principal_id == "alice"
    fetched = jwks.fetches
    for _ in range(5):
        _refused(keys["next"].sign(), "not published")
    assert jwks.fetches == fetched


def test_alg_none_is_refused(jwks: JWKSServer):
    unsigned = jwt.encode(
        {"iss": ISSUER, "aud": AUDIENCE, "sub": "x", "tenant_id": "acme", "exp": 9999999999}, None, algorithm="none"
    )
    _refused(unsigned, "none")


def test_hmac_signed_with_the_public_key_is_refused(jwks: JWKSServer, keys: dict[str, SigningKey]):
    public_pem = (
        keys["rsa"]
        .private.public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    )
    claims = {"iss": ISSUER, "aud": AUDIENCE, "sub": "mallory", "tenant_id": "acme", "exp": 9999999999}
    forged = (
        jwt.api_jws.PyJWS().encode(
            jwt.utils.force_bytes(__import__("json").dumps(claims)),
            public_pem,
            algorithm="HS256",
            headers={"kid": "rsa-1"},
        )
        if False
        else _hs256_with_key(claims, public_pem)
    )
    _refused(forged, "HS256")


def _hs256_with_key(claims: dict[str, Any], secret: bytes) -> str:
    # PyJWT itself refuses to use a PEM public key as an HMAC secret, so build the token by hand.
    import base64
    import hashlib
    import hmac
    import json

    def b64(data: bytes) -> str:
        return base64.urlsafe_b64encode(data).rstrip(b"=").decode()

    head = b64(json.dumps({"alg": "HS256", "typ": "JWT", "kid": "rsa-1"}).encode())
    body = b64(json.dumps(claims).encode())
    signature = hmac.new(secret, f"{head}.{body}".encode(), hashlib.sha256).digest()
    return f"{head}.{body}.{b64(signature)}"


def test_missing_tenant_is_refused_unless_explicitly_allowed(
    jwks: JWKSServer, keys: dict[str, SigningKey], settings: Any
):
    token = keys["rsa"].sign(tenant_id=None)
    _refused(token, "tenant")
    settings.SAGA_JWT_ALLOW_MISSING_TENANT = True
    assert _auth(token).tenant_id == settings.SAGA_DEFAULT_TENANT


@pytest.mark.parametrize("claim", ["tid", "org_id"])
def test_tenant_comes_from_any_configured_claim(jwks: JWKSServer, keys: dict[str, SigningKey], claim: str):
    assert _auth(keys["rsa"].sign(tenant_id=None, **{claim: "globex"})).tenant_id == "globex"


def test_client_credentials_token_names_the_client(jwks: JWKSServer, keys: dict[str, SigningKey]):
    principal = _auth(keys["rsa"].sign(sub=None, client_id="billing-agent", roles=None, scp=["semantic-saga:execute"]))
    assert principal.principal_id == "billing-agent" and principal.principal_type == "service"
    assert principal.scopes == {"semantic-saga:execute"} and principal.roles == frozenset()


@pytest.mark.parametrize("header", [None, "", "Basic YWxpY2U6cHc=", "Bearer ", "Bearer not-a-jwt"])
def test_missing_or_malformed_credentials_are_refused(jwks: JWKSServer, header: str | None):
    with pytest.raises(AuthenticationFailed) as refused:
        authenticate(header, protocol="test")
    assert refused.value.challenge.startswith("Bearer")


def test_cached_keys_keep_working_while_the_issuer_is_down(keys: dict[str, SigningKey]):
    # given keys fetched once from an issuer that then goes down
    issuer = JWKSServer()
    issuer.keys = [keys["rsa"]]
    cache = JWKSCache(issuer.url, ttl=0, min_refresh=0)
    assert cache.key("rsa-1").key_id == "rsa-1"
    issuer.stop()
    # when the cache wants to refresh, the fetch fails; the last good keys still verify
    assert cache.key("rsa-1").key_id == "rsa-1"
    with pytest.raises(AuthenticationFailed):
        cache.key("rsa-2")


def test_protected_resource_metadata_names_the_issuer(jwks: JWKSServer, client: Any, settings: Any):
    answer = client.get("/.well-known/oauth-protected-resource/mcp")
    assert answer.status_code == 200
    body = answer.json()
    assert body["authorization_servers"] == [ISSUER]
    assert body["resource"] == settings.SAGA_PUBLIC_URL.rstrip("/") + "/mcp"
    assert "semantic-saga:execute" in body["scopes_supported"] and body["bearer_methods_supported"] == ["header"]


def test_protected_resource_metadata_is_absent_without_jwt(client: Any, settings: Any):
    settings.SAGA_AUTH_MODE = "none"
    assert client.get("/.well-known/oauth-protected-resource/mcp").status_code == 404


def test_a_token_verified_once_is_answered_without_blocking_until_it_expires(
    jwks: JWKSServer, keys: dict[str, SigningKey]
):
    from governance.identity.authentication import authenticate_now

    token = keys["rsa"].sign()
    header = f"Bearer {token}"
    # never seen: answering would need the signature check (and maybe a JWKS fetch), so it is left to a thread
    assert authenticate_now(header, protocol="test") is None
    verified = _auth(token)
    fetches = jwks.fetches
    # seen a moment ago: the same principal from memory, no JWKS fetch, on whichever protocol it was verified for
    assert authenticate_now(header, protocol="test") == verified
    assert authenticate_now(header, protocol="other") is None
    assert jwks.fetches == fetches
    with pytest.raises(AuthenticationFailed, match="Bearer <access token>"):
        authenticate_now("Basic abc", protocol="test")


def test_remembered_tokens_expire_with_the_token_and_are_bounded():
    from governance.identity.principal import local_principal
    from governance.identity.verified_tokens import VerifiedTokens

    remembered = VerifiedTokens(kept=2, seconds=60)
    someone = local_principal(protocol="test", tenant_id="acme")
    remembered.put("expired-token-0123456789", "test", someone, expires_at=0.0)
    assert remembered.get("expired-token-0123456789", "test") is None
    for name in ("first", "second", "third"):
        remembered.put(f"{name}-token-0123456789", "test", someone, expires_at=4_102_444_800.0)
    assert remembered.get("first-token-0123456789", "test") is None  # the least recently used went first
    assert remembered.get("third-token-0123456789", "test") == someone
    assert all("token" not in key[0] for key in remembered._entries)  # digests only, never the token
