"""REST API fixtures: static bearer tokens (as the protocol tests use), a client per persona, committed rows."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from rest_framework.test import APIClient

from governance.identity.principal import Principal
from tests.conftest import make_principal

TOKENS = {
    "alice-operator-acme-token": {"principal_id": "alice", "tenant_id": "acme", "roles": ["operator"]},
    "bob-operator-acme-token-02": {"principal_id": "bob", "tenant_id": "acme", "roles": ["operator"]},
    "vera-viewer-acme-token-01": {"principal_id": "vera", "tenant_id": "acme", "roles": ["viewer"]},
    "ada-admin-acme-token-0001": {"principal_id": "ada", "tenant_id": "acme", "roles": ["admin"]},
    "mallory-operator-globex-01": {"principal_id": "mallory", "tenant_id": "globex", "roles": ["operator"]},
    "reader-scoped-acme-token1": {
        "principal_id": "ci-bot",
        "tenant_id": "acme",
        "principal_type": "service",
        "scopes": ["semantic-saga:read"],
    },
}
ALICE, BOB, VERA, ADA, MALLORY, READER = list(TOKENS)
API = "/api/v1"


@pytest.fixture(autouse=True)
def _committed_db(transactional_db: None) -> None:
    """Runs execute on executor threads: rows must be committed for them to see."""


@pytest.fixture(autouse=True)
def static_tokens(settings: Any, tmp_path: Path) -> Path:
    path = tmp_path / "tokens.json"
    path.write_text(json.dumps({"tokens": TOKENS}))
    settings.SAGA_AUTH_MODE = "static"
    settings.SAGA_AUTH_STATIC_TOKENS = str(path)
    return path


@pytest.fixture
def client_for() -> Callable[[str | None], APIClient]:
    def make(token: str | None) -> APIClient:
        client = APIClient()
        if token:
            client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
        return client

    return make


@pytest.fixture
def alice(client_for: Callable[[str | None], APIClient]) -> APIClient:
    return client_for(ALICE)


@pytest.fixture
def bob(client_for: Callable[[str | None], APIClient]) -> APIClient:
    return client_for(BOB)


@pytest.fixture
def vera(client_for: Callable[[str | None], APIClient]) -> APIClient:
    return client_for(VERA)


@pytest.fixture
def mallory(client_for: Callable[[str | None], APIClient]) -> APIClient:
    return client_for(MALLORY)


def principal(token: str) -> Principal:
    """The Principal a token stands for, to set up state through the coordinator directly."""
    entry = TOKENS[token]
    return make_principal(str(entry["principal_id"]), str(entry["tenant_id"]), *entry.get("roles", []))


def ok(response: Any, status: int = 200) -> Any:
    """The JSON body, after checking the status (showing the body when it differs)."""
    assert response.status_code == status, (response.status_code, response.content[:2000])
    return response.json()


def refused(response: Any, status: int, code: str | None = None) -> dict[str, Any]:
    """The error object of a refusal, after checking status, shape and (optionally) code."""
    assert response.status_code == status, (response.status_code, response.content[:2000])
    error: dict[str, Any] = response.json()["error"]
    assert isinstance(error["message"], str) and error["message"]
    if code is not None:
        assert error["code"] == code, error
    return error
