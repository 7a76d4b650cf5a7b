"""Hostile bearer tokens in JWT mode (issue 20, item 3): expired, wrong audience or issuer, signed by a key the
issuer never published (under a published kid), `alg: none`, oversize, garbage, and hostile claim values. Each is
either a principal (only when properly signed, current and for us) or AuthenticationFailed with a message and an
RFC 6750 challenge; never another exception (which every surface would answer as a 500)."""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from governance.errors import AuthenticationFailed
from governance.identity.authentication import authenticate
from tests.fuzz.hostile import FUZZ, json_values
from tests.governance.jwks import AUDIENCE, ISSUER, JWKSServer, SigningKey

TRUSTED = SigningKey("rsa-1", "RS256")
STRANGER = SigningKey("rsa-1", "RS256")  # the same kid, another key: a forgery


@pytest.fixture(scope="module")
def jwks_server() -> Iterator[JWKSServer]:
    server = JWKSServer()
    server.keys = [TRUSTED]
    yield server
    server.stop()


@pytest.fixture
def jwt_mode(jwks_server: JWKSServer, settings: Any) -> None:
    settings.SAGA_AUTH_MODE = "jwt"
    settings.SAGA_JWT_ISSUER = ISSUER
    settings.SAGA_JWT_AUDIENCE = AUDIENCE
    settings.SAGA_JWT_JWKS_URL = jwks_server.url


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unsigned(claims: dict[str, Any]) -> str:
    header = _b64(json.dumps({"alg": "none", "typ": "JWT", "kid": "rsa-1"}).encode())
    return f"{header}.{_b64(json.dumps(claims, default=str).encode())}."


claim_overrides = st.fixed_dictionaries(
    {},
    optional={
        "exp": st.sampled_from([int(time.time()) - 3600, 0, -1, "soon", None]),
        "aud": st.sampled_from(["someone-else", [], ["someone-else"], 5, None]),
        "iss": st.sampled_from([ISSUER + "/", "https://evil.example", "", None]),
        "tenant_id": json_values | st.just("t" * 100_000),
        "roles": json_values,
        "sub": json_values,
        "nbf": st.sampled_from([int(time.time()) + 3600, "later"]),
    },
)
tokens = st.one_of(
    st.tuples(st.sampled_from(["trusted", "stranger", "none"]), claim_overrides),
    st.tuples(st.just("raw"), st.one_of(st.text(max_size=200), st.just("a." * 50_000), st.just("x" * 200_000))),
)


@FUZZ
@given(token=tokens)
def test_a_hostile_token_is_refused_with_a_challenge_never_an_error(jwt_mode: None, token: tuple[str, Any]) -> None:
    kind, value = token
    if kind == "raw":
        text = value
    elif kind == "none":
        text = _unsigned({"iss": ISSUER, "aud": AUDIENCE, "sub": "alice", "tenant_id": "acme", **value})
    else:
        text = (TRUSTED if kind == "trusted" else STRANGER).sign(**value)
    try:
        principal = authenticate(f"Bearer {text}", protocol="test")
    except AuthenticationFailed as refused:
        assert refused.message and refused.challenge.startswith("Bearer"), refused
        return
    # Only a token signed by the published key, current and for this audience and issuer, may become a principal.
    assert kind == "trusted", f"{kind} token accepted: {principal}"
    assert not {"exp", "aud", "iss", "nbf"} & {k for k, v in value.items() if v is not None}, principal
    assert isinstance(principal.tenant_id, str) and principal.tenant_id, principal
