"""Starting our `semantic-saga-mcp` / `semantic-saga-a2a` the way semantic-saga-mcp's CI smoke jobs start theirs:
the console script, the seed's flags, a log file, a free port on 127.0.0.1, and a bounded wait for the port."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from tests.distributed.workers import free_port

ROOT = Path(__file__).resolve().parents[2]
# A CI runner's environment, not the test session's (no DATABASE_URL, no test lease): the flags say the rest.
INHERITED = ("PATH", "HOME", "LANG", "TMPDIR")
# Our start migrates a fresh database first; the seed's jobs gave theirs 5 s on an idle runner.
READY_SECONDS = 120.0


@dataclass
class SeedServer:
    port: int
    proc: subprocess.Popen[bytes]
    log: Path

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def mcp_url(self) -> str:
        return f"{self.base}/mcp"

    def output(self) -> str:
        return self.log.read_text(errors="replace")


def command(program: str) -> list[str]:
    """The installed console script when there is one (as the seed's CI runs it), else the module."""
    script = Path(sys.executable).parent / program
    if script.exists():
        return [str(script)]
    module = {"semantic-saga-mcp": "saga_project.seed_cli", "semantic-saga-a2a": "saga_project.seed_a2a_cli"}[program]
    return [sys.executable, "-m", module]


@contextlib.contextmanager
def seed_server(program: str, flags: list[str], workdir: Path, port: int, **extra_env: str) -> Iterator[SeedServer]:
    """`program *flags` in `workdir`, stopped (terminate, then kill) when the block ends; yields once the port
    accepts connections, as the seed's jobs poll for it. Fails with the log if it exits or is not ready in time."""
    env = {key: os.environ[key] for key in INHERITED if key in os.environ} | extra_env
    log = workdir / f"{program}-{port}.log"
    with log.open("wb") as out:
        proc = subprocess.Popen([*command(program), *flags], cwd=workdir, env=env, stdout=out, stderr=subprocess.STDOUT)
    server = SeedServer(port, proc, log)
    try:
        wait_for_port(server)
        yield server
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=30)


def wait_for_port(server: SeedServer, seconds: float = READY_SECONDS) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if server.proc.poll() is not None:
            raise AssertionError(f"the server exited with {server.proc.returncode}:\n{server.output()}")
        try:
            with socket.create_connection(("127.0.0.1", server.port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.1)
    raise AssertionError(f"the server did not accept connections within {seconds:g} s:\n{server.output()}")


@contextlib.asynccontextmanager
async def bearer_client(url: str, token: str) -> Iterator[Client]:  # type: ignore[misc]
    """The official client over Streamable HTTP with a bearer token, as the seed's auth jobs build it."""
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60)
    async with http, Client(streamable_http_client(url, http_client=http)) as client:
        yield client


__all__ = ["ROOT", "SeedServer", "bearer_client", "command", "free_port", "seed_server", "wait_for_port"]


def seed_policy(revision: str) -> dict[str, Any]:
    """The policy document of the seed's governance job, under `revision`: every tenant allowed, approval from low
    risk up, one node at a time."""
    budgets = {"max_steps_per_saga": 10, "max_planned_nodes": 10, "max_risk_units": 20, "max_parallel": 1}
    tenant = {"default_effect": "allow", "approval_at_or_above_risk": "low", "budgets": budgets}
    return {"schema_version": 1, "revision": revision, "default_effect": "deny", "tenants": {"*": tenant}}
