"""`semantic-saga-a2a`, the replaced product's A2A command line: its flags, then a migrated, serving A2A peer."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from saga_project.seed_a2a_cli import _a2a_environment, _parser
from tests.distributed.workers import free_port
from tests.protocols.a2a_client import connect
from tests.protocols.conftest import RunningServer, _wait_healthy

ROOT = Path(__file__).resolve().parents[2]
# What the seed README's example needs from the environment; the flags supply the rest.
INHERITED = ("PATH", "HOME", "LANG", "SECRET_KEY", "TMPDIR")


def _command(*flags: str) -> list[str]:
    return [sys.executable, "-m", "saga_project.seed_a2a_cli", *flags]


def test_stdio_is_refused_with_the_command_that_serves_it():
    done = subprocess.run(_command("--transport", "stdio"), cwd=ROOT, capture_output=True, text=True, timeout=60)

    assert done.returncode == 1 and "semantic-saga-mcp" in done.stderr


def test_flags_become_the_environment_with_the_public_url_as_card_url_and_allowed_host(tmp_path: Path):
    flags = ["--host", "0.0.0.0", "--a2a-public-url", "https://saga.example.com/", "--database", "x.db"]
    args = _parser().parse_args([*flags, "--actions", "actions.json", "--worker-id", "replica-1"])

    env = _a2a_environment(args)

    assert env["SAGA_PUBLIC_URL"] == "https://saga.example.com"
    assert env["ALLOWED_HOSTS"].split(",")[-1] == "saga.example.com"
    assert env["DATABASE_URL"] == f"sqlite:///{os.path.abspath('x.db')}"
    assert env["SAGA_ACTIONS_FILE"] == os.path.abspath("actions.json") and env["SAGA_WORKER_ID"] == "replica-1"
    assert args.port == 8100  # the seed README's A2A default


def test_seed_readme_command_migrates_and_serves_an_a2a_peer(tmp_path: Path):
    # given the seed README's flags: a fresh SQLite file, the example registry, a public URL
    port = free_port()
    env = {key: os.environ[key] for key in INHERITED if key in os.environ}
    env["SAGA_FILE_ROOT"] = str(tmp_path / "files")
    flags = [
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--a2a-public-url",
        f"http://127.0.0.1:{port}/",
        "--database",
        str(tmp_path / "semantic-saga.db"),
        "--actions",
        str(ROOT / "examples" / "action_registry.json"),
        "--worker-id",
        "a2a-test",
    ]
    log = tmp_path / "a2a.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(_command(*flags), cwd=tmp_path, env=env, stdout=out, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        _wait_healthy(RunningServer(base, proc, log))

        # when a peer discovers it and asks for the registered actions
        async def scenario() -> tuple[Any, dict[str, Any]]:
            async with connect(base, "no-token-needed") as peer:
                return peer.card, await peer.ok({"operation": "list_actions"})

        card, actions = asyncio.run(scenario())
    finally:
        proc.terminate()
        proc.wait(timeout=30)

    # then the card names the public URL, auth is off (loopback, mode none) and the example registry is loaded
    assert card.supported_interfaces[0].url == f"{base}/a2a"
    assert not card.security_requirements
    assert {"charge_card", "update_inventory"} <= {action["id"] for action in actions["actions"]}
