"""A `semantic-saga serve` on the test database for the seed-answer tests: the static tokens of tests/protocols
(alice and bob operators of acme, vera its viewer, mallory an operator of globex) plus the settings a test names."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from mcp import Client

from tests.distributed.workers import free_port, shared_database_url
from tests.protocols.conftest import TOKENS, wait_healthy
from tests.protocols.mcp_client import connect

T = TypeVar("T")

ROOT = Path(__file__).resolve().parents[2]


@dataclass
class AnswersServer:
    base: str
    files: Path

    @property
    def mcp_url(self) -> str:
        return f"{self.base}/mcp"


@contextmanager
def answers_server(workdir: Path, **settings: str) -> Iterator[AnswersServer]:
    """Serve until the block ends; yields once /healthz answers (fails with the server's log otherwise)."""
    tokens = workdir / "tokens.json"
    tokens.write_text(json.dumps({"tokens": TOKENS}))
    port = free_port()
    files = workdir / "files"
    env = {
        **os.environ,
        "DATABASE_URL": shared_database_url(),
        "SAGA_AUTH_MODE": "static",
        "SAGA_AUTH_STATIC_TOKENS": str(tokens),
        "SAGA_FILE_ROOT": str(files),
        "SAGA_PUBLIC_URL": f"http://127.0.0.1:{port}",
        **settings,
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
    try:
        wait_healthy(f"http://127.0.0.1:{port}", proc, log)
        yield AnswersServer(f"http://127.0.0.1:{port}", files)
    finally:
        proc.terminate()
        proc.wait(timeout=30)


@contextmanager
def governed_answers_server(workdir: Path, policy: dict[str, object]) -> Iterator[AnswersServer]:
    """`answers_server` with `policy` as its JSON policy file (SAGA_POLICY_MODE=json)."""
    path = workdir / "policy.json"
    path.write_text(json.dumps(policy))
    with answers_server(workdir, SAGA_POLICY_MODE="json", SAGA_POLICY_FILE=str(path)) as running:
        yield running


def run_as(server: AnswersServer, token: str, scenario: Callable[[Client], Awaitable[T]]) -> T:
    """Run `scenario` with an official MCP client connected to `server` with `token`."""

    async def session() -> T:
        async with connect(server.mcp_url, token, "auto") as client:
            return await scenario(client)

    return asyncio.run(session())
