"""Static token files for development and CI."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from django.core.exceptions import ImproperlyConfigured

from governance.errors import AuthenticationFailed
from governance.identity.authentication import authenticate
from governance.identity.tokens import StaticTokenVerifier

TOKENS = {
    "tokens": {
        "alice-operator-token-0001": {"principal_id": "alice", "tenant_id": "acme", "roles": ["operator"]},
        "ci-bot-readonly-token-0002": {
            "principal_id": "ci-bot",
            "tenant_id": "acme",
            "scopes": ["semantic-saga:read"],
            "principal_type": "service",
        },
    }
}


@pytest.fixture
def token_file(tmp_path: Path, settings: Any) -> Path:
    path = tmp_path / "tokens.json"
    path.write_text(json.dumps(TOKENS))
    settings.SAGA_AUTH_MODE = "static"
    settings.SAGA_AUTH_STATIC_TOKENS = str(path)
    return path


def test_known_token_becomes_its_principal(token_file: Path):
    principal = authenticate("Bearer alice-operator-token-0001", protocol="mcp")
    assert (principal.principal_id, principal.tenant_id, principal.roles) == ("alice", "acme", {"operator"})
    bot = authenticate("bearer ci-bot-readonly-token-0002", protocol="a2a")
    assert bot.principal_type == "service" and bot.scopes == {"semantic-saga:read"} and bot.protocol == "a2a"


def test_unknown_token_is_refused(token_file: Path):
    with pytest.raises(AuthenticationFailed) as refused:
        authenticate("Bearer alice-operator-token-0009", protocol="mcp")
    assert "not recognized" in refused.value.message


@pytest.mark.parametrize(
    ("content", "complaint"),
    [
        ("{not json", "not valid JSON"),
        (json.dumps({"tokens": {}}), "non-empty"),
        (json.dumps({"tokens": {"short": {"principal_id": "a", "tenant_id": "t"}}}), "16 characters"),
        (json.dumps({"tokens": {"a-long-enough-token-1": {"principal_id": "a"}}}), "tenant_id"),
    ],
)
def test_bad_token_file_is_refused_with_its_path(tmp_path: Path, content: str, complaint: str):
    path = tmp_path / "tokens.json"
    path.write_text(content)
    with pytest.raises(ImproperlyConfigured) as refused:
        StaticTokenVerifier(str(path))
    assert complaint in str(refused.value) and str(path) in str(refused.value)


def test_no_auth_mode_makes_every_caller_the_local_admin(settings: Any):
    settings.SAGA_AUTH_MODE = "none"
    principal = authenticate(None, protocol="mcp")
    assert principal.roles == {"admin"} and principal.tenant_id == settings.SAGA_DEFAULT_TENANT
    assert principal.authenticated is False
