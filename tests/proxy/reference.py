"""The official reference MCP servers the shipped packs are vetted against, installed here when missing at the
versions pinned in tests/proxy/reference_servers/ (npm ci from package-lock.json; a virtualenv of its own from
git-requirements.txt for mcp-server-git, so its dependencies never touch the project's), and an agent session
through the journaled proxy against one of them."""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from io import StringIO
from pathlib import Path
from typing import Any

import anyio
import pytest
from django.core.management import call_command
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

from sagas.protocols.proxy.runtime import journaled
from tests.proxy.agent import connect, text
from tests.proxy.harness import config_file, serve_proxy

SERVERS = Path(__file__).resolve().parent / "reference_servers"
BIN = SERVERS / "node_modules" / ".bin"
GIT_VENV = SERVERS / "git-venv"
INSTALL_SECONDS = 300


@contextmanager
def _install_lock() -> Iterator[None]:
    """Two test workers never install into the same directory at once."""
    with (SERVERS / ".install.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _run(command: list[str], what: str) -> None:
    done = subprocess.run(command, cwd=SERVERS, capture_output=True, text=True, timeout=INSTALL_SECONDS)
    assert done.returncode == 0, f"{what} in {SERVERS} failed:\n{done.stdout}\n{done.stderr}"


def npm_server(name: str) -> Path:
    """The pinned npm server's executable (npm ci once; a machine without npm fails here, saying so)."""
    executable = BIN / name
    with _install_lock():
        if not executable.exists():
            _run(["npm", "ci", "--no-audit", "--no-fund", "--loglevel=error"], "npm ci (Node.js and npm are needed)")
    return executable


def git_server() -> Path:
    """mcp-server-git at its pinned version, in a virtualenv of its own (created once)."""
    executable = GIT_VENV / "bin" / "mcp-server-git"
    with _install_lock():
        if not executable.exists():
            _run([sys.executable, "-m", "venv", str(GIT_VENV)], "creating the git server's virtualenv")
            pip = [str(GIT_VENV / "bin" / "pip"), "install", "--quiet", "--disable-pip-version-check"]
            _run([*pip, "-r", str(SERVERS / "git-requirements.txt")], "installing mcp-server-git")
    return executable


def call_directly(server: dict[str, Any], tool: str, arguments: dict[str, Any]) -> Any:
    """One call on the server itself (not through the proxy): its answer."""

    async def call() -> Any:
        params = StdioServerParameters(
            command=server["command"], args=server.get("args", []), env={**os.environ, **server.get("env", {})}
        )
        async with Client(stdio_client(params)) as client:
            return await client.call_tool(tool, arguments)

    return anyio.run(call)


def agent_session(
    directory: Path, name: str, server: dict[str, Any], pack: str, calls: list[tuple[str, dict[str, Any]]]
) -> list[Any]:
    """An agent's session through the journaled proxy (official client, Streamable HTTP) with `pack`: each call's
    answer, in order."""
    config = config_file(directory, {name: server}, packs=[pack])
    with serve_proxy(config, call_path=journaled) as served:

        async def agent() -> list[Any]:
            async with connect(served.url, "legacy") as client:
                return [await client.call_tool(tool, arguments) for tool, arguments in calls]

        return anyio.run(agent)


def succeeded(answers: list[Any]) -> None:
    for answer in answers:
        assert not answer.is_error, text(answer)


def refused_undo() -> list[dict[str, Any]]:
    """`semantic-saga undo --json` where an inverse is refused or fails (it exits 1): the report's items."""
    out = StringIO()
    with pytest.raises(SystemExit):
        call_command("undo", "--json", stdout=out)
    return list(json.loads(out.getvalue())["items"])
