"""What the plain server (tests/proxy/plain_server.py) received, and the journal's steps once finished: shared by the
fast path's tests over stdio and over HTTP."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from sagas.models import Step
from tests.distributed.workers import shared_database_url
from tests.proxy.harness import ROOT, config_file
from tests.proxy.raw_agent import RawAgent

PLAIN = Path(__file__).with_name("plain_server.py")
BIN = Path(sys.executable).parent


def plain_proxy(tmp_path: Path, server: dict[str, Any], *, fast: bool = True, **env: str) -> RawAgent:
    """`semantic-saga proxy` in front of the plain server `server` (its config entry), the agent's handshake done;
    answers past 64 KiB are not relayed."""
    config = config_file(tmp_path, {"plain": server})
    environment = {
        **os.environ,
        "DATABASE_URL": shared_database_url(),
        "SAGA_PROXY_FAST_PATH": "true" if fast else "false",
        "SAGA_PROXY_MAX_RESULT_BYTES": str(64 * 1024),
        **env,
    }
    command = [str(BIN / "semantic-saga"), "proxy", "--config", str(config)]
    agent = RawAgent(command, environment, ROOT, tmp_path / f"stderr-{time.monotonic_ns()}.txt")
    agent.handshake()
    return agent


def received(record: Path) -> list[dict[str, Any]]:
    """Every message the plain server received, in order."""
    return [json.loads(line)["message"] for line in record.read_text().splitlines()]


def calls(record: Path) -> list[dict[str, Any]]:
    """The tools/call requests among them."""
    return [m for m in received(record) if isinstance(m, dict) and m.get("method") == "tools/call"]


def finished_steps(count: int, timeout: float = 30.0) -> list[Step]:
    """The steps once `count` are finished (reads and intended writes are journaled just behind their answers)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        steps = list(Step.objects.order_by("sequence"))
        if len(steps) >= count and all(step.status != "EXECUTING" for step in steps):
            return steps
        time.sleep(0.05)
    raise AssertionError(f"not {count} finished steps within {timeout}s: {list(Step.objects.values('status'))}")
