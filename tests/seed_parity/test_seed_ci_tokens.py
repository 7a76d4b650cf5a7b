"""The seed's static-token file read as it is, short tokens only on loopback, required scopes, token expiry, and
protected-resource metadata whenever an issuer is configured (governance.identity)."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.test import Client as DjangoClient
from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
from starlette.routing import Route
from starlette.testclient import TestClient

from governance.errors import AuthenticationFailed
from governance.identity import listening
from governance.identity.authentication import authenticate
from governance.identity.http import BearerAuth, request_principal
from governance.identity.tokens import StaticTokenVerifier
from tests.seed_parity.seed_ci_harness import command, free_port

SEED_FILE = {
    "operator-token": {
        "client_id": "agent-client",
        "subject": "alice",
        "scopes": ["semantic-saga"],
        "claims": {"tenant_id": "acme", "roles": ["operator"], "principal_type": "user"},
    },
    "service-token-long-enough": {"client_id": "deploy-bot", "scopes": [], "claims": {"org_id": "globex"}},
}


@pytest.fixture
def loopback() -> Iterator[None]:
    before = listening.declared_host()
    listening.declare_listening("127.0.0.1")
    yield
    listening._declared_host = before


@pytest.fixture
def seed_tokens(tmp_path: Path, settings: Any) -> Path:
    path = tmp_path / "tokens.json"
    path.write_text(json.dumps(SEED_FILE), encoding="utf-8")
    settings.SAGA_AUTH_MODE = "static"
    settings.SAGA_AUTH_STATIC_TOKENS = str(path)
    return path


def test_a_seed_token_means_what_it_meant_there(seed_tokens: Path, loopback: None):
    # the subject is the principal; tenant, roles and type come from the claims
    alice = authenticate("Bearer operator-token", protocol="mcp")
    assert (alice.principal_id, alice.tenant_id, alice.roles, alice.principal_type) == (
        "alice",
        "acme",
        {"operator"},
        "user",
    )
    assert alice.scopes == {"semantic-saga"}
    # no subject: the client id, a service; the tenant found under a fallback claim
    bot = authenticate("Bearer service-token-long-enough", protocol="a2a")
    assert (bot.principal_id, bot.tenant_id, bot.principal_type) == ("deploy-bot", "globex", "service")


def test_short_tokens_are_refused_unless_the_server_listens_on_loopback_only(seed_tokens: Path):
    listening.declare_listening("0.0.0.0")
    try:
        with pytest.raises(ImproperlyConfigured, match=r"listens on 0\.0\.0\.0") as refused:
            StaticTokenVerifier(str(seed_tokens))
    finally:
        listening._declared_host = None
    assert "at least 16 characters" in str(refused.value) and "operator-token" not in str(refused.value)
    listening.declare_listening("::1")
    try:
        assert StaticTokenVerifier(str(seed_tokens)).short_tokens == [
            f"{seed_tokens}: tokens entry 1 (alice, 14 characters)"
        ]
    finally:
        listening._declared_host = None


def test_a_tenantless_seed_token_stops_start_up_unless_allowed(tmp_path: Path, settings: Any, loopback: None):
    path = tmp_path / "tokens.json"
    path.write_text(json.dumps({"no-tenant-token-here": {"client_id": "c", "claims": {}}}), encoding="utf-8")
    with pytest.raises(ImproperlyConfigured, match="no tenant claim"):
        StaticTokenVerifier(str(path))
    settings.SAGA_JWT_ALLOW_MISSING_TENANT = True
    settings.SAGA_AUTH_MODE, settings.SAGA_AUTH_STATIC_TOKENS = "static", str(path)
    assert authenticate("Bearer no-tenant-token-here", protocol="mcp").tenant_id == settings.SAGA_DEFAULT_TENANT


def test_an_expired_seed_token_is_refused(tmp_path: Path, settings: Any):
    path = tmp_path / "tokens.json"
    entry = {"client_id": "c", "claims": {"tenant_id": "acme"}, "expires_at": int(time.time()) - 1}
    path.write_text(json.dumps({"an-expired-token-0001": entry}), encoding="utf-8")
    settings.SAGA_AUTH_MODE, settings.SAGA_AUTH_STATIC_TOKENS = "static", str(path)
    with pytest.raises(AuthenticationFailed, match="expired"):
        authenticate("Bearer an-expired-token-0001", protocol="mcp")


def test_a_token_without_a_required_scope_is_403_insufficient_scope(seed_tokens: Path, settings: Any, loopback: None):
    async def whoami(request: Any) -> PlainTextResponse:
        return PlainTextResponse(request_principal().principal_id)

    app = BearerAuth(Starlette(routes=[Route("/mcp", whoami)]), protocol="mcp", resource_path="/mcp")
    settings.SAGA_AUTH_REQUIRED_SCOPES = ["semantic-saga"]
    with TestClient(app) as client:
        allowed = client.get("/mcp", headers={"Authorization": "Bearer operator-token"})
        refused = client.get("/mcp", headers={"Authorization": "Bearer service-token-long-enough"})
    assert allowed.status_code == 200 and allowed.text == "alice"
    assert refused.status_code == 403 and 'error="insufficient_scope"' in refused.headers["www-authenticate"]


@pytest.mark.django_db
def test_resource_metadata_is_served_in_static_mode_once_an_issuer_is_set(seed_tokens: Path, settings: Any):
    client = DjangoClient()
    assert client.get("/.well-known/oauth-protected-resource/mcp").status_code == 404
    settings.SAGA_JWT_ISSUER = "https://auth.example.com"
    settings.SAGA_PUBLIC_URL = "http://127.0.0.1:8124"
    body = client.get("/.well-known/oauth-protected-resource/mcp").json()
    assert body["authorization_servers"] == ["https://auth.example.com/"]
    assert body["resource"] == "http://127.0.0.1:8124/mcp"
    settings.SAGA_AUTH_MODE = "none"  # no tokens checked: no authorization server to name
    assert client.get("/.well-known/oauth-protected-resource/mcp").status_code == 404


def test_a_short_token_stops_a_server_that_listens_beyond_loopback(tmp_path: Path):
    (tmp_path / "tokens.json").write_text(json.dumps(SEED_FILE), encoding="utf-8")
    flags = ["--transport", "streamable-http", "--host", "0.0.0.0", "--port", str(free_port())]
    flags += ["--database", str(tmp_path / "x.db"), "--auth-mode", "static", "--auth-static-tokens", "tokens.json"]
    done = subprocess.run(
        [*command("semantic-saga-mcp"), *flags], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 1, done.stderr
    assert "at least 16 characters" in done.stderr and "listens on 0.0.0.0" in done.stderr, done.stderr
    assert not (tmp_path / "x.db").exists()


@pytest.mark.django_db
def test_the_rest_api_answers_a_missing_required_scope_with_403(seed_tokens: Path, settings: Any, loopback: None):
    settings.SAGA_AUTH_REQUIRED_SCOPES = ["semantic-saga"]
    client = DjangoClient()
    allowed = client.get("/api/v1/sagas/", HTTP_AUTHORIZATION="Bearer operator-token")
    refused = client.get("/api/v1/sagas/", HTTP_AUTHORIZATION="Bearer service-token-long-enough")
    assert allowed.status_code == 200, allowed.content
    assert refused.status_code == 403 and "semantic-saga" in refused.json()["error"]["message"]
