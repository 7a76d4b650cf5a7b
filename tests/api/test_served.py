"""/api/v1 through the real ASGI app (`semantic-saga serve`): Starlette routes it to Django, bearer auth applies."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.protocols.conftest import ALICE, RunningServer, start_server


@pytest.fixture
def served(tmp_path: Path) -> Iterator[RunningServer]:
    running = start_server(tmp_path)
    try:
        yield running
    finally:
        running.proc.terminate()
        running.proc.wait(timeout=30)


def test_the_served_api_authenticates_begins_and_lists(served: RunningServer):
    api = f"{served.base}/api/v1"
    # without a token: 401 with a challenge
    anonymous = httpx.get(f"{api}/sagas/", timeout=10)
    assert anonymous.status_code == 401 and anonymous.headers["www-authenticate"].startswith("Bearer")
    # with one: begin, then list
    auth = {"Authorization": f"Bearer {ALICE}"}
    begun = httpx.post(f"{api}/sagas/", json={"metadata": {"via": "asgi"}}, headers=auth, timeout=10)
    assert begun.status_code == 201, begun.text
    listed = httpx.get(f"{api}/sagas/", headers=auth, timeout=10).json()
    assert [s["id"] for s in listed["sagas"]] == [begun.json()["id"]]
    # and the schema is served
    schema = httpx.get(f"{api}/schema/?format=json", timeout=10).json()
    assert "/api/v1/sagas/{saga_id}/run/" in schema["paths"]
