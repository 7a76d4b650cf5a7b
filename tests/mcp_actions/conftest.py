"""A real downstream MCP server per test module: examples/demo_mcp_server.py (a CRM, an email outbox and a bank)
served by uvicorn over Streamable HTTP on a free 127.0.0.1 port, plus builders for `kind: mcp` contracts."""

from __future__ import annotations

import importlib.util
import socket
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import anyio
import httpx
import pytest
import uvicorn
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from registry.actions.context import InvocationContext

ROOT = Path(__file__).resolve().parents[2]
DEMO_PATH = ROOT / "examples" / "demo_mcp_server.py"
FAST_RETRY = {"initial_backoff_seconds": 0, "backoff_multiplier": 1, "max_backoff_seconds": 0, "jitter": 0}


def load_demo() -> ModuleType:
    spec = importlib.util.spec_from_file_location("demo_mcp_server", DEMO_PATH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


demo = load_demo()


@dataclass
class DemoWorld:
    """The running demo server: its URL, the in-process World (to stall a call), and HTTP readers."""

    base: str
    world: Any

    @property
    def url(self) -> str:
        return f"{self.base}/mcp"

    def state(self) -> dict[str, Any]:
        answer: dict[str, Any] = httpx.get(f"{self.base}/world", timeout=10).json()
        return answer

    def calls(self, tool: str | None = None) -> list[dict[str, Any]]:
        return [call for call in self.state()["calls"] if tool is None or call["tool"] == tool]

    def keys(self, tool: str) -> list[str | None]:
        return [call["idempotency_key"] for call in self.calls(tool)]

    def reset(self) -> None:
        httpx.post(f"{self.base}/reset", timeout=10).raise_for_status()

    def call_tool(self, name: str, arguments: dict[str, Any]) -> Any:
        """Call a tool directly (test set-up), outside any saga."""

        async def go() -> Any:
            async with Client(streamable_http_client(self.url), mode="legacy") as client:
                result = await client.call_tool(name, arguments)
                assert not result.is_error, result.content
                return result.structured_content

        return anyio.run(go)


@pytest.fixture(scope="module")
def demo_server() -> Iterator[DemoWorld]:
    world = demo.World()
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))  # a free port, held until uvicorn takes it over: no race
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(demo.http_app(demo.build_server(world)), log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "the demo MCP server did not start"
        time.sleep(0.02)
    try:
        yield DemoWorld(f"http://127.0.0.1:{port}", world)
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        sock.close()


@pytest.fixture
def crm(demo_server: DemoWorld) -> DemoWorld:
    """The module's demo server with the seed world restored for this test."""
    demo_server.reset()
    return demo_server


def http_server(url: str, **extra: Any) -> dict[str, Any]:
    return {"transport": "streamable_http", "url": url, **extra}


def stdio_server(state_file: Path) -> dict[str, Any]:
    return {"transport": "stdio", "command": sys.executable, "args": [str(DEMO_PATH), "--state", str(state_file)]}


def mcp_contract(
    action_id: str,
    server: dict[str, Any],
    forward: dict[str, Any],
    *,
    compensation: dict[str, Any] | None = None,
    capture: dict[str, Any] | None = None,
    reversibility: str | None = None,
    idempotent: bool = False,
    max_attempts: int = 1,
    version: str = "1.0.0",
) -> dict[str, Any]:
    contract: dict[str, Any] = {
        "id": action_id,
        "version": version,
        "kind": "mcp",
        "semantic": {
            "domain": "crm",
            "operation": forward["tool"],
            "resource": action_id,
            "risk": "low",
            "reversibility": reversibility or ("compensable" if compensation else "irreversible"),
        },
        "input_schema": {"type": "object"},
        "execution_policy": {
            "forward": {"max_attempts": max_attempts, **FAST_RETRY},
            "compensation": {"max_attempts": 3, **FAST_RETRY},
            "idempotent": idempotent,
        },
        "server": server,
        "forward": {"timeout_seconds": 10, **forward},
    }
    if compensation is not None:
        contract["compensation"] = {"timeout_seconds": 10, **compensation}
    if capture is not None:
        contract["capture"] = capture
    return contract


def create_contact(server: dict[str, Any], **options: Any) -> dict[str, Any]:
    return mcp_contract(
        "create_contact",
        server,
        {"tool": "create_contact", "arguments": {"name": "${input.name}", "email": "${input.email}"}},
        compensation={"tool": "delete_contact", "arguments": {"id": "${result.id}"}},
        reversibility="reversible",
        **options,
    )


def context(
    step_id: str = "step-1", *, compensation: bool = False, result: Any = None, **payload: Any
) -> InvocationContext:
    return InvocationContext(
        saga_id="saga-1",
        step_id=step_id,
        idempotency_key=f"{step_id}:rollback" if compensation else step_id,
        input=payload,
        result=result,
    )
