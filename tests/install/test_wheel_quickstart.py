"""The README's second quickstart, "in front of your own MCP servers", as a new user runs it: the wheel built from
this checkout, installed into a fresh virtualenv in a temporary directory, used with no environment beyond PATH and
HOME (no DATABASE_URL, no SECRET_KEY, no .env, no `migrate`). A client starts `semantic-saga proxy --config FILE`
from the user's project directory in front of a small stdio MCP server (examples/demo_mcp_server.py and its pack);
the official `mcp` client makes a call the config holds; a person approves it from another terminal and another
directory; the call completes; `undo` removes what it created; `verify` walks the session's chain; `ledger` lists it.

Building and installing take a minute or two (pip uses the package indexes and cache this machine is set up with,
each step bounded by a time limit). It runs once, in the SQLite pass of `make test`: it configures no database of
its own, so the PostgreSQL pass would repeat it unchanged.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

from tests.proxy.terminal import run_at_terminal

ROOT = Path(__file__).resolve().parents[2]
BUILD_SECONDS = 300
INSTALL_SECONDS = 900
COMMAND_SECONDS = 120
HELD_SECONDS = 60

pytestmark = pytest.mark.skipif(
    os.environ.get("DATABASE_URL", "").startswith("postgres"),
    reason="runs once, in the SQLite pass: the installed copy configures no database, so this pass would repeat it",
)


@dataclass(frozen=True)
class Installed:
    bin: Path  # the fresh virtualenv's bin
    env: dict[str, str]  # PATH and HOME, nothing else
    project: Path  # the user's project directory (where the client starts the proxy)
    elsewhere: Path  # another terminal's working directory

    def run(self, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(self.bin / "semantic-saga"), *args],
            env=self.env,
            cwd=cwd or self.elsewhere,
            capture_output=True,
            text=True,
            timeout=COMMAND_SECONDS,
            stdin=subprocess.DEVNULL,
        )


def _source_copy(into: Path) -> Path:
    """The checkout's files (tracked, or new and not ignored), so building leaves nothing in the working tree."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        check=True,
        timeout=COMMAND_SECONDS,
    ).stdout.decode()
    for name in filter(None, listed.split("\0")):
        source = ROOT / name
        if source.is_file():
            (into / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, into / name)
    return into


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    work = tmp_path_factory.mktemp("wheel")
    source = _source_copy(work / "source")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "--wheel-dir", str(work / "dist"), str(source)],
        check=True,
        timeout=BUILD_SECONDS,
    )
    (built,) = (work / "dist").glob("semantic_saga-*.whl")
    return built


@pytest.fixture(scope="module")
def installed(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Installed:
    work = tmp_path_factory.mktemp("user")
    venv = work / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=COMMAND_SECONDS)
    # pip with this machine's own configuration (its package indexes) and cache: only the commands below run bare.
    subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", str(wheel)],
        check=True,
        timeout=INSTALL_SECONDS,
    )
    project, elsewhere, home = work / "project", work / "elsewhere", work / "home"
    for directory in (project, elsewhere, home):
        directory.mkdir()
    for name in ("demo_mcp_server.py", "demo_pack.json"):
        shutil.copy2(ROOT / "examples" / name, project / name)
    env = {"PATH": f"{venv / 'bin'}{os.pathsep}/usr/bin{os.pathsep}/bin", "HOME": str(home)}
    return Installed(venv / "bin", env, project, elsewhere)


def test_the_wheel_carries_what_the_app_reads_at_run_time(wheel: Path):
    names = set(zipfile.ZipFile(wheel).namelist())

    assert {
        "saga_project/templates/landing.html",
        "saga_project/templates/admin/index.html",
        "saga_project/templates/admin/sagas/saga/approvals.html",
        "registry/action_registry.schema.json",
        "governance/policy/governance_policy.schema.json",
        "sagas/protocols/proxy/proxy_config.schema.json",
        "sagas/migrations/0001_initial.py",
        "saga_project/operator_settings.py",
    } <= names
    for app in ("audit", "registry", "governance", "sagas"):
        migrations = {n for n in names if n.startswith(f"{app}/migrations/0")}
        assert migrations == {p.relative_to(ROOT).as_posix() for p in (ROOT / app / "migrations").glob("0*.py")}


def test_the_proxy_quickstart_from_a_fresh_virtualenv_with_nothing_configured(installed: Installed):
    # given: the user's config, written next to their own server, naming a pack and a call to hold
    config = installed.project / "saga.json"
    config.write_text(
        json.dumps(
            {
                "servers": {
                    "demo": {
                        "command": str(installed.bin / "python"),
                        "args": ["demo_mcp_server.py", "--state", "world.json"],
                        # relative args start in `cwd`, itself relative to this file: `undo` from anywhere finds them
                        "cwd": ".",
                    }
                },
                "packs": ["demo_pack.json"],
                "policy": {"tools": [{"tool": "create_contact", "action": "confirm", "reason": "a person checks"}]},
            }
        )
    )
    command = [str(installed.bin / "semantic-saga"), "proxy", "--config", str(config)]
    params = StdioServerParameters(command=command[0], args=command[1:], env=installed.env, cwd=str(installed.project))
    decided: dict[str, subprocess.CompletedProcess[str]] = {}

    def approve_from_another_terminal() -> str:
        held = _wait_for_held_call(installed)
        decided["approve"] = run_at_terminal(
            [str(installed.bin / "semantic-saga"), "approve", held, "--by", "grace"],
            env=installed.env,
            cwd=installed.elsewhere,
        )
        return held

    async def agent() -> tuple[Any, str]:
        async with Client(stdio_client(params), mode="legacy") as client:
            operator = asyncio.create_task(asyncio.to_thread(approve_from_another_terminal))
            created = await client.call_tool("create_contact", {"name": "Lin", "email": "lin@example.com"})
            return created, await operator

    # when: the agent's call is held, and approved by a person elsewhere
    created, held = asyncio.run(asyncio.wait_for(agent(), timeout=COMMAND_SECONDS * 2))

    # then: the call went through as the downstream answered it
    assert decided["approve"].returncode == 0, decided["approve"].stdout
    assert f"approved {held}" in decided["approve"].stdout
    assert not created.is_error, created
    contact = created.structured_content
    assert contact is not None and contact["email"] == "lin@example.com"
    assert _contacts(installed)[contact["id"]]["name"] == "Lin"

    # when: the session is undone and its chain verified, from the other directory
    undone = installed.run("undo")
    verified = installed.run("verify")
    ledger = installed.run("ledger")

    # then: the contact is gone again, the chain is whole, and one database served every command
    assert undone.returncode == 0, undone.stdout + undone.stderr
    assert contact["id"] not in _contacts(installed)
    assert verified.returncode == 0, verified.stdout + verified.stderr
    assert "create_contact" in verified.stdout and "OK" in verified.stdout
    assert ledger.returncode == 0 and "create_contact" in ledger.stdout, ledger.stderr
    data = Path(installed.env["HOME"]) / ".local" / "share" / "semantic-saga"
    assert (data / "semantic-saga.db").is_file() and (data / "secret_key").is_file()
    assert not list(installed.project.glob("*.db")) and list(installed.elsewhere.iterdir()) == []


def _wait_for_held_call(installed: Installed) -> str:
    """`semantic-saga pending --json` from another directory until the call is there; its id."""
    deadline = time.monotonic() + HELD_SECONDS
    while time.monotonic() < deadline:
        listed = installed.run("pending", "--json")
        assert listed.returncode == 0, listed.stderr
        rows = [json.loads(line) for line in listed.stdout.splitlines() if line.strip()]
        if rows:
            (row,) = rows
            assert row["tool"] == "create_contact"
            return str(row["id"])
        time.sleep(0.5)
    raise AssertionError(f"no held call within {HELD_SECONDS}s")


def _contacts(installed: Installed) -> dict[str, Any]:
    world: dict[str, Any] = json.loads((installed.project / "world.json").read_text(encoding="utf-8"))
    return dict(world["contacts"])
