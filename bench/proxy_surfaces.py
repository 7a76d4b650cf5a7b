"""The proxy as clients use it: over stdio and over Streamable HTTP, journal on the embedded SQLite default and on
PostgreSQL, a read tool (`get_status`, readOnlyHint, gated allow) against the same downstream called directly.

Downstream: bench/mcp_bare.py. Over stdio the official `mcp` client spawns it (direct) or spawns
`semantic-saga proxy --config` which spawns it (proxied); the proxy's database is a SAGA_HOME of its own (SQLite,
no DATABASE_URL) or the bench's saga_bench. Over HTTP one downstream runs under uvicorn and two
`semantic-saga serve` processes with SAGA_PROXY_CONFIG front it at /proxy/mcp, one per database. One session per
round and side (opening it, and the processes it spawns, untimed), one call per iteration, the sides alternating.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx2
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from bench import common
from bench.common import Child, Children, free_port, median, progress, saga_env
from bench.mcp_roundtrip import PRINCIPAL, TOKEN, wait_ready
from bench.mcp_surfaces import home_env

TOOL = "get_status"
TRANSPORTS = ("stdio", "http")
DATABASES = ("sqlite", "postgresql")
SCRIPT = str(Path(sys.executable).parent / "semantic-saga")
DOWNSTREAM = [sys.executable, "-m", "bench.mcp_bare", "--stdio"]


def server_name() -> str:
    """The downstream's name in the proxy configuration, from a digest of the bare server's source and the mcp
    version: the proxy pins a server's tools on first use and holds a tool new to a known server for confirmation,
    so a changed bare server is a new server (its tools pinned at first listing) rather than a held call."""
    from importlib.metadata import version

    source = (common.ROOT / "bench" / "mcp_bare.py").read_bytes() + version("mcp").encode()
    return "bench_" + hashlib.sha256(source).hexdigest()[:8]


def read_policy() -> dict[str, Any]:
    return {"tools": [{"tool": TOOL, "action": "allow", "reason": "the benchmark's read"}]}


def stdio_config() -> dict[str, Any]:
    """The stdio proxy's configuration: the bare server spawned over stdio from the repository root."""
    server = {"command": DOWNSTREAM[0], "args": DOWNSTREAM[1:], "cwd": str(common.ROOT)}
    return {"servers": {server_name(): server}, "policy": read_policy()}


def http_config(downstream_url: str) -> dict[str, Any]:
    # The benchmark's own server: trusted on first use (an HTTP proxy reviews every tool first by default).
    server = {"url": downstream_url, "headers": {"Authorization": f"Bearer {TOKEN}"}, "trust": "first-use"}
    return {"servers": {server_name(): server}, "policy": read_policy()}


def proxy_env(database: str, home: Path, **extra: str) -> dict[str, str]:
    """SQLite: the home's embedded database; PostgreSQL: saga_bench."""
    return home_env(home, **extra) if database == "sqlite" else saga_env(**extra)


@dataclass
class Servers:
    downstream: tuple[Child, str] | None = None
    http_proxies: dict[str, tuple[Child, str]] = field(default_factory=dict)
    stdio_config: Path | None = None

    def stop(self) -> None:
        for child, _ in self.http_proxies.values():
            child.stop()
        if self.downstream:
            self.downstream[0].stop()


def start_all(children: Children) -> Servers:
    """The HTTP downstream, then one HTTP proxy per database in front of it; the stdio configuration file."""
    servers = Servers()
    children.log_dir.mkdir(parents=True, exist_ok=True)
    servers.stdio_config = children.log_dir / "bench-proxy-stdio.json"
    servers.stdio_config.write_text(json.dumps(stdio_config()))
    port = free_port()
    command = [sys.executable, "-m", "bench.mcp_bare", "--port", str(port), "--token", TOKEN]
    servers.downstream = (children.start("proxy-read-downstream", command, saga_env()), f"http://127.0.0.1:{port}/mcp")
    wait_ready(*servers.downstream)
    config = children.log_dir / "bench-proxy-read.json"
    config.write_text(json.dumps(http_config(servers.downstream[1])))
    tokens = children.log_dir / "proxy-read-tokens.json"
    tokens.write_text(json.dumps({"tokens": {TOKEN: PRINCIPAL}}))
    for database in DATABASES:
        port = free_port()
        env = proxy_env(
            database,
            common.WORK / "home-proxy-http",
            SAGA_AUTH_MODE="static",
            SAGA_AUTH_STATIC_TOKENS=str(tokens),
            SAGA_PUBLIC_URL=f"http://127.0.0.1:{port}",
            SAGA_PROXY_CONFIG=str(config),
            SAGA_SWEEP_INTERVAL_SECONDS="86400",
        )
        command = [sys.executable, "-m", "saga_project.cli", "serve", "--port", str(port), "--log-level", "warning"]
        child = children.start(f"proxy-read-{database}", command, env)
        servers.http_proxies[database] = (child, f"http://127.0.0.1:{port}/proxy/mcp")
    for child, url in servers.http_proxies.values():
        wait_ready(child, url)
    return servers


async def _timed(client: Client, iterations: int) -> list[float]:
    async def call() -> None:
        result = await client.call_tool(TOOL, {})
        if result.is_error:
            text = result.content[0].text if result.content else result  # type: ignore[union-attr]
            raise RuntimeError(f"{TOOL} failed: {text}")

    await call()  # warm-up: the session, the tool list, server-side imports
    samples = []
    for _ in range(iterations):
        started = time.perf_counter()
        await call()
        samples.append(time.perf_counter() - started)
    return samples


async def _http(url: str, iterations: int) -> list[float]:
    headers = {"Authorization": f"Bearer {TOKEN}"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30.0, read=60.0)) as http,
        Client(streamable_http_client(url, http_client=http), mode="legacy") as client,
    ):
        return await _timed(client, iterations)


async def _stdio(params: StdioServerParameters, iterations: int) -> list[float]:
    async with Client(params, mode="legacy") as client:
        return await _timed(client, iterations)


def stdio_params(servers: Servers, side: str, database: str) -> StdioServerParameters:
    if side == "direct":
        return StdioServerParameters(command=DOWNSTREAM[0], args=DOWNSTREAM[1:], env=saga_env(), cwd=str(common.ROOT))
    home = common.WORK / "home-proxy-stdio"
    env = proxy_env(database, home)
    command = [SCRIPT, "proxy", "--config", str(servers.stdio_config)]
    return StdioServerParameters(command=command[0], args=command[1:], env=env, cwd=str(common.WORK))


def one_session(servers: Servers, transport: str, database: str, side: str, iterations: int) -> list[float]:
    if transport == "stdio":
        return asyncio.run(_stdio(stdio_params(servers, side, database), iterations))
    assert servers.downstream is not None
    url = servers.downstream[1] if side == "direct" else servers.http_proxies[database][1]
    return asyncio.run(_http(url, iterations))


def measure(servers: Servers, rounds: int, iterations: int) -> dict[str, dict[str, list[list[float]]]]:
    """Per "transport/database": "direct" and "proxied" per-round samples (seconds per call)."""
    out: dict[str, dict[str, list[list[float]]]] = {}
    for round_no in range(rounds):
        for transport in TRANSPORTS:
            for database in DATABASES:
                figure = out.setdefault(f"{transport}/{database}", {"direct": [], "proxied": []})
                sides = ("direct", "proxied") if round_no % 2 == 0 else ("proxied", "direct")
                for side in sides:
                    figure[side].append(one_session(servers, transport, database, side, iterations))
                direct, proxied = (median(figure[side][-1]) * 1000 for side in ("direct", "proxied"))
                name = f"{transport}/{database}"
                progress(
                    f"proxy round {round_no + 1}/{rounds} {name}: direct {direct:.2f} ms, proxied {proxied:.2f} ms"
                )
    return out
