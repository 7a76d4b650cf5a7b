"""semantic-saga-mcp's "Smoke server startup on PostgreSQL" step (.github/workflows/postgres-ci.yml) against our
`semantic-saga-mcp`: Streamable HTTP on a PostgreSQL DSN with the job's worker id and its 2-second lease, on a
database of its own created for the test; the job waits for the port, and so does this test."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import psycopg
import pytest
from psycopg import sql

from tests.seed_parity.seed_ci_harness import free_port, seed_server

ADMIN_DSN = "postgresql://postgres@127.0.0.1:5432/postgres"


@pytest.fixture
def postgres_dsn() -> Iterator[str]:
    """A fresh, empty database on the local PostgreSQL (as the job's service container is), dropped afterwards."""
    name = f"seed_ci_{uuid.uuid4().hex[:12]}"
    try:
        admin = psycopg.connect(ADMIN_DSN, autocommit=True, connect_timeout=5)
    except psycopg.OperationalError as exc:
        pytest.skip(f"no PostgreSQL at {ADMIN_DSN}: {exc}")
    with admin:
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        try:
            yield f"postgresql://postgres@127.0.0.1:5432/{name}"
        finally:
            admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


def test_server_starts_on_postgresql_with_a_two_second_lease(postgres_dsn: str, tmp_path: Path):
    port = free_port()
    flags = ["--transport", "streamable-http", "--host", "127.0.0.1", "--port", str(port)]
    flags += ["--postgres-dsn", postgres_dsn, "--worker-id", "ci-worker", "--lease-seconds", "2"]

    with seed_server("semantic-saga-mcp", flags, tmp_path, port) as server:
        # the job stops at the open port; ours also answers its health check from that database
        health = httpx.get(f"{server.base}/healthz", timeout=30).json()

    assert health == {"status": "ok", "database": "postgresql"}
