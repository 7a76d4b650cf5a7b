"""`GET /` answers something useful on a served instance: a page naming every surface, or the same as JSON."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

SURFACES = ["/mcp", "/a2a", "/.well-known/agent-card.json", "/api/v1/docs/", "/admin/", "/healthz"]

pytestmark = pytest.mark.django_db


def test_a_browser_gets_a_page_naming_every_surface(client: Client):
    page = client.get("/", HTTP_ACCEPT="text/html,application/xhtml+xml,*/*;q=0.8")
    assert page.status_code == 200 and page["Content-Type"].startswith("text/html")
    text = page.content.decode()
    for path in SURFACES:
        assert f'href="{path}"' in text


def test_a_client_that_accepts_anything_gets_the_page(client: Client):
    assert client.get("/", HTTP_ACCEPT="*/*")["Content-Type"].startswith("text/html")


def test_a_json_client_gets_the_same_index_as_json(client: Client, settings: object):
    settings.SAGA_PUBLIC_URL = "https://saga.example.com/"  # type: ignore[attr-defined]
    index = client.get("/", HTTP_ACCEPT="application/json")
    assert index.status_code == 200
    endpoints = index.json()["endpoints"]
    assert sorted(e["path"] for e in endpoints.values()) == sorted(SURFACES)
    assert endpoints["agent_card"]["url"] == "https://saga.example.com/.well-known/agent-card.json"


def test_first_run_says_how_to_create_the_operator_account_until_there_is_one(client: Client):
    first = client.get("/")
    assert "semantic-saga createsuperuser" in first.content.decode()
    assert client.get("/", HTTP_ACCEPT="application/json").json()["create_operator"].endswith("createsuperuser")
    get_user_model().objects.create_superuser("root", "root@example.com", "a-long-password-1")
    assert "createsuperuser" not in client.get("/").content.decode()
    assert client.get("/", HTTP_ACCEPT="application/json").json()["create_operator"] is None


def test_the_landing_page_is_read_only(client: Client):
    assert client.post("/").status_code == 405
