"""The replaced product's example, end to end: "begin a saga to charge card and update inventory, then commit",
with the shipped example registry against the shipped demo service, over HTTP and over stdio."""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

from registry.services import registry_load_file
from tests.distributed.workers import shared_database_url
from tests.protocols.conftest import ALICE, DEMO_TOKEN, RunningServer
from tests.protocols.mcp_client import call, connect
from tests.sagas.helpers import wait_until

ROOT = Path(__file__).resolve().parents[2]
DEMO = "http://127.0.0.1:9999"  # the port the example registry's HTTP actions call
# The demo service has a fixed port and a stock these tests count: xdist workers take turns with it (a file lock
# held from start to stop), or one worker's service would answer, or vanish under, another worker's test.
PORT_LOCK = Path(tempfile.gettempdir()) / "semantic-saga-demo-service-9999.lock"


@contextlib.contextmanager
def _port_turn(timeout: float = 180) -> Iterator[None]:
    with PORT_LOCK.open("w") as lock:
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise AssertionError(f"port 9999 stayed taken by another test worker for {timeout}s") from None
                time.sleep(0.05)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


@pytest.fixture(scope="module")
def demo_service() -> Iterator[str]:
    with _port_turn():
        yield from _serve_demo()


def _serve_demo() -> Iterator[str]:
    env = {**os.environ, "PAYMENTS_TOKEN": DEMO_TOKEN}
    proc = subprocess.Popen(
        [sys.executable, str(ROOT / "examples" / "demo_service.py")],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )

    def up() -> bool:
        assert proc.poll() is None, "examples/demo_service.py exited: is port 9999 already taken?"
        try:
            return httpx.get(DEMO, timeout=1).status_code == 200
        except httpx.TransportError:
            return False

    wait_until(up, timeout=20, what="the demo service on port 9999")
    yield DEMO
    proc.terminate()
    proc.wait(timeout=10)


async def _charge_and_reserve(client: Client, delta: int) -> dict[str, Any]:
    sid = (await call(client, "begin_saga", {"metadata": {"order": "42"}}))["id"]
    await call(
        client,
        "plan_saga_step",
        {"saga_id": sid, "action": "charge_card", "input": {"amount": 2500, "currency": "EUR"}, "key": "charge"},
    )
    await call(
        client,
        "plan_saga_step",
        {
            "saga_id": sid,
            "action": "update_inventory",
            "input": {"sku": "A-1", "delta": delta},
            "key": "inventory",
            "depends_on": ["charge"],
        },
    )
    ran = await call(client, "run_ready_steps", {"saga_id": sid})
    if ran["status"] != "ACTIVE":
        return ran
    return await call(client, "commit_saga", {"saga_id": sid})


def _stock() -> int:
    return int(httpx.get(DEMO, timeout=5).json()["stock"]["A-1"])


def test_seed_example_over_http(server: RunningServer, demo_service: str):
    registry_load_file(ROOT / "examples" / "action_registry.json")
    before = _stock()

    async def scenario() -> dict[str, Any]:
        async with connect(server.mcp_url, ALICE, "auto") as client:
            return await _charge_and_reserve(client, -1)

    saga = asyncio.run(scenario())
    assert saga["status"] == "COMMITTED", saga.get("error")
    assert _stock() == before - 1


def test_seed_example_over_http_rolls_back_the_charge_when_inventory_fails(server: RunningServer, demo_service: str):
    registry_load_file(ROOT / "examples" / "action_registry.json")

    async def scenario() -> dict[str, Any]:
        async with connect(server.mcp_url, ALICE, "legacy") as client:
            return await _charge_and_reserve(client, -1000)  # more than in stock: the service answers 409

    saga = asyncio.run(scenario())
    assert saga["status"] == "ROLLED_BACK"
    charge_id = saga["steps"][0]["result"]["id"]
    assert httpx.get(DEMO, timeout=5).json()["charges"][charge_id]["refunded"] is True


def test_seed_example_over_stdio(demo_service: str, tmp_path: Path):
    before = _stock()
    env = {**os.environ, "DATABASE_URL": shared_database_url(), "PAYMENTS_TOKEN": DEMO_TOKEN}
    command = Path(sys.executable).parent / "semantic-saga-mcp"
    params = StdioServerParameters(
        command=str(command), args=["--actions", "examples/action_registry.json"], env=env, cwd=str(ROOT)
    )

    async def scenario() -> dict[str, Any]:
        async with Client(stdio_client(params)) as client:
            return await _charge_and_reserve(client, -1)

    saga = asyncio.run(scenario())
    assert saga["status"] == "COMMITTED", saga.get("error")
    assert _stock() == before - 1
