"""MCP round trip through the official client over Streamable HTTP: our server vs a bare MCPServer.

Ours: `semantic-saga serve` on a free loopback port with a static bearer token, the bench database and the
embedded executor; each iteration is `begin_saga` then `execute_saga_step` (noop). Bare: bench/mcp_bare.py with
one no-op tool, called twice per iteration. Both over one stateful session per round (client mode `legacy`,
the initialize handshake), both servers started by the harness, rounds alternate between them.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from typing import Any

import httpx
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from bench.common import Child, Children, free_port, saga_env

TOKEN = "bench-operator-token-0123456789abcdef"
PRINCIPAL = {"principal_id": "bench", "tenant_id": "bench", "roles": ["operator"]}


def _healthy(url: str) -> bool:
    try:
        return httpx.get(url, timeout=2).status_code < 500
    except httpx.TransportError:
        return False


def start_ours(children: Children) -> tuple[Child, str]:
    """Start (without waiting) our server; returns it and its /mcp URL."""
    port = free_port()
    children.log_dir.mkdir(parents=True, exist_ok=True)
    tokens = children.log_dir / "tokens.json"
    tokens.write_text(json.dumps({"tokens": {TOKEN: PRINCIPAL}}))
    env = saga_env(
        SAGA_AUTH_MODE="static",
        SAGA_AUTH_STATIC_TOKENS=str(tokens),
        SAGA_PUBLIC_URL=f"http://127.0.0.1:{port}",
        # The server shares the bench database and, without a broker, sweeps it every few seconds, re-sending
        # "lost" nudges into its own executor: during a 64-saga batch it would run the harness's queued nodes as
        # an extra executor. It serves MCP calls only here, so its sweeper is pushed out of the run.
        SAGA_SWEEP_INTERVAL_SECONDS="86400",
    )
    command = [sys.executable, "-m", "saga_project.cli", "serve", "--port", str(port), "--log-level", "warning"]
    return children.start("mcp-ours", command, env), f"http://127.0.0.1:{port}/mcp"


def start_bare(children: Children) -> tuple[Child, str]:
    """Start (without waiting) the bare MCPServer; returns it and its /mcp URL."""
    port = free_port()
    command = [sys.executable, "-m", "bench.mcp_bare", "--port", str(port), "--token", TOKEN]
    return children.start("mcp-bare", command, saga_env()), f"http://127.0.0.1:{port}/mcp"


def wait_ready(child: Child, mcp_url: str) -> None:
    """Any HTTP answer below 500 on /mcp (401 without a token) means the server is serving."""
    child.wait_for(lambda: _healthy(mcp_url), 90, "an answer on /mcp")


async def _pairs(url: str, iterations: int, ours: bool) -> list[float]:
    """Seconds per iteration (two tool calls) over one session; the first call of the session is not timed."""
    headers = {"Authorization": f"Bearer {TOKEN}"}
    timeout = httpx2.Timeout(30.0, read=60.0)
    samples: list[float] = []
    async with (
        httpx2.AsyncClient(headers=headers, timeout=timeout) as http,
        Client(streamable_http_client(url, http_client=http), mode="legacy") as client,
    ):
        await _pair(client, ours)  # warm-up: tool list cache, connection, server-side imports
        for _ in range(iterations):
            started = time.perf_counter()
            await _pair(client, ours)
            samples.append(time.perf_counter() - started)
    return samples


async def _pair(client: Client, ours: bool) -> None:
    if ours:
        saga = await _call(client, "begin_saga", {"metadata": {"bench": "mcp"}})
        await _call(client, "execute_saga_step", {"saga_id": saga["id"], "action": "noop", "input": {}})
    else:
        await _call(client, "noop", {})
        await _call(client, "noop", {"saga_id": "x", "action": "noop", "input": {}})


async def _call(client: Client, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    result = await client.call_tool(tool, arguments)
    if result.is_error:
        text = result.content[0].text if result.content else result  # type: ignore[union-attr]
        raise RuntimeError(f"MCP tool {tool} failed: {text}")
    return dict(result.structured_content or {})


def round_trip(url: str, iterations: int, *, ours: bool) -> list[float]:
    return asyncio.run(_pairs(url, iterations, ours))
