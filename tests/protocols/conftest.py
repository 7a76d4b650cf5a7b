"""A real `semantic-saga serve` process per test module, on the test database, with static bearer tokens."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.distributed.workers import free_port, shared_database_url

ROOT = Path(__file__).resolve().parents[2]
TOKENS = {
    "alice-operator-acme-token": {"principal_id": "alice", "tenant_id": "acme", "roles": ["operator"]},
    "vera-viewer-acme-token-01": {"principal_id": "vera", "tenant_id": "acme", "roles": ["viewer"]},
    "mallory-operator-globex-01": {"principal_id": "mallory", "tenant_id": "globex", "roles": ["operator"]},
    "bob-operator-acme-token-02": {"principal_id": "bob", "tenant_id": "acme", "roles": ["operator"]},
}
ALICE, VERA, MALLORY, BOB = list(TOKENS)
DEMO_TOKEN = "demo-payments-token"  # the example actions send it to examples/demo_service.py


@dataclass
class RunningServer:
    base: str
    proc: subprocess.Popen[bytes]
    log: Path

    @property
    def mcp_url(self) -> str:
        return f"{self.base}/mcp"


@pytest.fixture(autouse=True)
def _committed_db(transactional_db: None) -> None:
    """The server is another process: test rows must be committed."""


@pytest.fixture(scope="module")
def server(
    django_db_setup: None, django_db_blocker: object, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RunningServer]:
    running = start_server(tmp_path_factory.mktemp("server"))
    try:
        yield running
    finally:
        running.proc.terminate()
        running.proc.wait(timeout=30)


def start_server(workdir: Path, port: int | None = None, **extra_env: str) -> RunningServer:
    """`semantic-saga serve` on the test database with TOKENS (and `extra_env`, e.g. SAGA_PROXY_CONFIG); returns
    once /healthz answers. The caller stops it."""
    tokens = workdir / "tokens.json"
    tokens.write_text(json.dumps({"tokens": TOKENS}))
    port = port or free_port()
    env = {
        **os.environ,
        "DATABASE_URL": shared_database_url(),
        "SAGA_AUTH_MODE": "static",
        "SAGA_AUTH_STATIC_TOKENS": str(tokens),
        "SAGA_FILE_ROOT": str(workdir / "files"),
        "SAGA_PUBLIC_URL": f"http://127.0.0.1:{port}",
        "PAYMENTS_TOKEN": DEMO_TOKEN,
        **extra_env,
    }
    log = workdir / "serve.log"
    with log.open("ab") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "saga_project.cli", "serve", "--port", str(port), "--log-level", "warning"],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    running = RunningServer(f"http://127.0.0.1:{port}", proc, log)
    try:
        _wait_healthy(running)
    except BaseException:
        proc.terminate()
        proc.wait(timeout=30)
        raise
    return running


def _wait_healthy(running: RunningServer) -> None:
    wait_healthy(running.base, running.proc, running.log)


def wait_healthy(base: str, proc: subprocess.Popen[bytes], log: Path, seconds: float = 60) -> None:
    """Until `serve` at `base` answers /healthz; fails with its log if it exits or does not within `seconds`."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        assert proc.poll() is None, log.read_text()
        try:
            if httpx.get(f"{base}/healthz", timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    pytest.fail("the server did not become healthy:\n" + log.read_text())
