"""Who may call /api/v1: bearer tokens (as on /mcp and /a2a), console sessions (CSRF on), and nobody else."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from governance.models import OperatorProfile
from tests.api.conftest import API, ok, refused


@pytest.mark.parametrize("path", ["sagas/", "approvals/", "actions/", "policy/"])
def test_no_credentials_is_401_with_a_bearer_challenge(path: str):
    response = APIClient().get(f"{API}/{path}")
    error = refused(response, 401, "UNAUTHENTICATED")
    assert response["WWW-Authenticate"].startswith("Bearer")
    assert "Authorization: Bearer" in error["message"]


def test_a_write_without_credentials_is_401_and_changes_nothing(alice: APIClient):
    refused(APIClient().post(f"{API}/sagas/", {}), 401, "UNAUTHENTICATED")
    assert ok(alice.get(f"{API}/sagas/"))["sagas"] == []


@pytest.mark.parametrize(
    ("header", "error_code"),
    [("Bearer not-a-known-token-at-all", "invalid_token"), ("Basic YWxpY2U6cHc=", "invalid_request")],
)
def test_a_refused_token_is_401_with_the_verifiers_challenge(header: str, error_code: str):
    response = APIClient().get(f"{API}/sagas/", HTTP_AUTHORIZATION=header)
    refused(response, 401, "UNAUTHENTICATED")
    assert f'error="{error_code}"' in response["WWW-Authenticate"]


def test_the_principal_is_the_tokens(alice: APIClient):
    saga = ok(alice.post(f"{API}/sagas/"), 201)
    assert saga["metadata"]["_identity"] == {
        "principal_id": "alice",
        "tenant_id": "acme",
        "principal_type": "user",
        "protocol": "rest",
        "roles": ["operator"],
        "identity_source": "oauth-access-token",
    }


def _console_client(user: User) -> APIClient:
    client = APIClient(enforce_csrf_checks=True)
    client.force_login(user)
    return client


def test_a_console_operator_reads_and_acts_as_their_profile(django_user_model: Any):
    # given a console account with an acme operator profile
    user = django_user_model.objects.create_user("olga", password="pw-olga-123")
    OperatorProfile.objects.create(user=user, tenant_id="acme", role="operator")
    client = _console_client(user)
    # then it reads
    assert ok(client.get(f"{API}/sagas/"))["sagas"] == []
    # and a write without the CSRF token is refused
    error = refused(client.post(f"{API}/sagas/", {}), 403, "FORBIDDEN")
    assert "CSRF" in error["message"]
    # and with it, the saga belongs to the profile's tenant
    client.get("/admin/login/")  # any page that sets the CSRF cookie
    token = client.cookies["csrftoken"].value
    saga = ok(client.post(f"{API}/sagas/", {}, HTTP_X_CSRFTOKEN=token), 201)
    assert saga["tenant_id"] == "acme" and saga["creator_principal_id"] == "user:olga"


def test_a_console_account_without_a_tenant_sees_nothing(django_user_model: Any):
    user = django_user_model.objects.create_user("nobody", password="pw-nobody-123", is_staff=True)
    error = refused(_console_client(user).get(f"{API}/sagas/"), 403, "FORBIDDEN")
    assert "not assigned to a tenant" in error["message"]


def test_the_console_session_and_browsable_api_render_html(django_user_model: Any):
    admin = django_user_model.objects.create_superuser("root", password="pw-root-123")
    response = _console_client(admin).get(f"{API}/sagas/", HTTP_ACCEPT="text/html")
    assert response.status_code == 200 and b"Saga List" in response.content and b"next_cursor" in response.content


def test_auth_mode_none_makes_the_caller_the_local_admin(settings: Any):
    settings.SAGA_AUTH_MODE = "none"
    saga = ok(APIClient().post(f"{API}/sagas/", {}), 201)
    assert saga["tenant_id"] == settings.SAGA_DEFAULT_TENANT
    assert saga["creator_principal_id"] == "anonymous-local"


def test_schema_and_docs_are_public():
    schema = ok(APIClient().get(f"{API}/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json"))
    assert schema["openapi"].startswith("3.1")
    assert schema["components"]["securitySchemes"]["bearerAuth"] == {
        **schema["components"]["securitySchemes"]["bearerAuth"],
        "type": "http",
        "scheme": "bearer",
    }
    for page in ("docs/", "redoc/"):
        response = APIClient().get(f"{API}/{page}")
        assert response.status_code == 200 and b"/static/drf_spectacular_sidecar/" in response.content
