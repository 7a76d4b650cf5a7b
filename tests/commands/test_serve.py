"""`semantic-saga serve` on the embedded default: a real uvicorn process, polled until healthy."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.distributed.workers import free_port

ROOT = Path(__file__).resolve().parents[2]
STARTUP_DEADLINE_SECONDS = 60


def _free_port() -> int:
    return free_port()


def _cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "saga_project.cli", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, dict[str, str]]]:
    workdir = tmp_path_factory.mktemp("serve")
    env = {
        **os.environ,
        "DATABASE_URL": f"sqlite:///{workdir / 'semantic-saga.db'}",
        "SAGA_ACTIONS_FILE": str(ROOT / "examples" / "action_registry.json"),
        "SAGA_FILE_ROOT": str(workdir / "files"),
        "DJANGO_SETTINGS_MODULE": "saga_project.settings",
    }
    migrated = _cli("migrate", "--no-input", env=env)
    assert migrated.returncode == 0, migrated.stderr
    port = _free_port()
    log = (workdir / "serve.log").open("w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "saga_project.cli", "serve", "--port", str(port)],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + STARTUP_DEADLINE_SECONDS
        while time.monotonic() < deadline:
            assert proc.poll() is None, (workdir / "serve.log").read_text()
            try:
                if httpx.get(f"{base}/healthz", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.2)
        else:
            pytest.fail("serve did not become healthy:\n" + (workdir / "serve.log").read_text())
        yield base, env
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        log.close()


def test_serve_answers_health_with_the_database(served: tuple[str, dict[str, str]]):
    base, _ = served
    answer = httpx.get(f"{base}/healthz", timeout=5)
    assert answer.json() == {"status": "ok", "database": "sqlite"}


def test_serve_answers_the_root_with_the_landing_page(served: tuple[str, dict[str, str]]):
    base, _ = served
    answer = httpx.get(f"{base}/", timeout=5)
    assert answer.status_code == 200 and "/.well-known/agent-card.json" in answer.text


def test_serve_renders_the_admin_login(served: tuple[str, dict[str, str]]):
    base, _ = served
    answer = httpx.get(f"{base}/admin/login/", timeout=5)
    assert answer.status_code == 200 and "Semantic Saga operator console" in answer.text


def test_serve_loads_the_actions_file_at_start_up(served: tuple[str, dict[str, str]]):
    _, env = served
    listed = _cli(
        "shell",
        "-c",
        "from registry.models import ActionDefinition as A; "
        "print(sorted(A.objects.values_list('action_id', flat=True)))",
        env=env,
    )
    assert "create_text_file" in listed.stdout


def test_serve_refuses_a_foreign_host_header(served: tuple[str, dict[str, str]]):
    base, _ = served
    answer = httpx.get(f"{base}/healthz", headers={"Host": "evil.example"}, timeout=5)
    assert answer.status_code == 400


def test_serve_refuses_to_start_with_pending_migrations(tmp_path: Path):
    env = {**os.environ, "DATABASE_URL": f"sqlite:///{tmp_path / 'empty.db'}"}
    refused = _cli("serve", "--port", str(_free_port()), env=env)
    assert refused.returncode != 0
    assert "semantic-saga migrate" in refused.stderr


def test_serve_refuses_a_network_bind_without_authentication(tmp_path: Path):
    env = {**os.environ, "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}", "SAGA_AUTH_MODE": "none"}
    assert _cli("migrate", "--no-input", env=env).returncode == 0
    refused = _cli("serve", "--host", "0.0.0.0", "--port", str(_free_port()), env=env)
    assert refused.returncode != 0
    assert "without authentication" in refused.stderr and "SAGA_AUTH_MODE" in refused.stderr


def test_weak_jwt_algorithms_are_refused_at_start_up(tmp_path: Path):
    env = {
        **os.environ,
        "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}",
        "SAGA_AUTH_MODE": "jwt",
        "SAGA_JWT_ISSUER": "https://id.example.test",
        "SAGA_JWT_AUDIENCE": "semantic-saga",
        "SAGA_JWT_JWKS_URL": "https://id.example.test/jwks",
        "SAGA_JWT_ALGORITHMS": "RS256,HS256",
    }
    refused = _cli("check", env=env)
    assert refused.returncode != 0 and "HS256" in refused.stderr


def test_the_listening_socket_is_tcp_so_every_accepted_connection_sends_without_delay():
    # asyncio sets TCP_NODELAY on an accepted connection only when its socket says it is TCP; without it a response
    # written as headers then body waits for the client's delayed ACK (40 ms) on a kept-alive connection.
    import socket

    from sagas.management.commands.serve import listening_sockets

    (sock,) = listening_sockets("127.0.0.1", 0, "semantic-saga serve", backlog=1)
    try:
        client = socket.create_connection(sock.getsockname())
        accepted, _ = sock.accept()
        with client, accepted:
            assert accepted.proto == socket.IPPROTO_TCP
    finally:
        sock.close()
