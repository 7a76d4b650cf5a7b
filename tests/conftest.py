"""Shared fixtures: personas, a file-backed test database, and a real local HTTP server for HTTP actions."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from governance.identity.principal import Principal
from tests.httpserver import RecordingHTTPServer


@pytest.fixture(scope="session")
def django_db_modify_db_settings(django_db_modify_db_settings_parallel_suffix: None) -> None:
    # SQLite tests use a file, not :memory:, so executor threads and subprocesses see the same database.
    from django.conf import settings

    db = settings.DATABASES["default"]
    if db["ENGINE"].endswith("sqlite3"):
        worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
        path = Path(tempfile.gettempdir()) / f"semantic-saga-test-{os.getpid()}-{worker}.sqlite3"
        db.setdefault("TEST", {})["NAME"] = str(path)


def make_principal(principal_id: str, tenant_id: str, *roles: str) -> Principal:
    return Principal(
        principal_id=principal_id,
        tenant_id=tenant_id,
        principal_type="user",
        roles=frozenset(roles),
        authenticated=True,
        protocol="test",
    )


@pytest.fixture
def operator() -> Principal:
    return make_principal("alice", "acme", "operator")


@pytest.fixture
def approver() -> Principal:
    return make_principal("bob", "acme", "operator")


@pytest.fixture
def outsider() -> Principal:
    return make_principal("mallory", "globex", "admin")


@pytest.fixture(scope="module")
def http_server() -> Iterator[RecordingHTTPServer]:
    server = RecordingHTTPServer()
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def downstream(http_server: RecordingHTTPServer) -> RecordingHTTPServer:
    """The module's server, with scripts and recorded requests cleared for this test."""
    http_server.reset()
    return http_server


@pytest.fixture
def file_root(settings: object, tmp_path: Path) -> Path:
    root = tmp_path / "files"
    root.mkdir()
    settings.SAGA_FILE_ROOT = str(root)  # type: ignore[attr-defined]
    return root
