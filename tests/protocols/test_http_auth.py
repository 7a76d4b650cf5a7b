"""The bearer gate in front of /mcp: a 401 challenge that points JWT clients at the protected-resource metadata."""

from __future__ import annotations

from typing import Any

from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
from starlette.routing import Route
from starlette.testclient import TestClient

from governance.identity.http import BearerAuth, request_principal


def _app() -> BearerAuth:
    async def whoami(request: Any) -> PlainTextResponse:
        principal = request_principal()
        return PlainTextResponse(f"{principal.principal_id}@{principal.tenant_id}")

    return BearerAuth(Starlette(routes=[Route("/mcp", whoami)]), protocol="mcp", resource_path="/mcp")


def test_jwt_challenge_names_the_protected_resource_metadata(settings: Any):
    settings.SAGA_AUTH_MODE = "jwt"
    settings.SAGA_JWT_ISSUER = "https://id.example.test"
    settings.SAGA_JWT_AUDIENCE = "semantic-saga"
    settings.SAGA_JWT_JWKS_URL = "http://127.0.0.1:9/jwks"
    settings.SAGA_PUBLIC_URL = "https://saga.example.test"
    answer = TestClient(_app()).get("/mcp")
    assert answer.status_code == 401
    challenge = answer.headers["www-authenticate"]
    assert challenge.startswith('Bearer error="invalid_token"')
    assert 'resource_metadata="https://saga.example.test/.well-known/oauth-protected-resource/mcp"' in challenge


def test_no_auth_mode_passes_the_local_principal_through(settings: Any):
    settings.SAGA_AUTH_MODE = "none"
    answer = TestClient(_app()).get("/mcp")
    assert answer.status_code == 200 and answer.text == f"anonymous-local@{settings.SAGA_DEFAULT_TENANT}"
