"""The proxy under attack, as agents reach it: `semantic-saga proxy` over stdio (one process per agent, the local
principal) or `semantic-saga serve` with SAGA_PROXY_CONFIG over Streamable HTTP (static bearer tokens), each in
front of tests/proxy/hostile_server.py, on the test database. The agent is the official `mcp` client."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import httpx2
from django.db import connections
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client

from tests.distributed.workers import free_port, shared_database_url
from tests.protocols.conftest import wait_healthy
from tests.proxy.agent import Agent
from tests.proxy.harness import READY_SECONDS, ROOT, stdio, wait_for_port

HOSTILE = Path(__file__).with_name("hostile_server.py")
BIN = Path(sys.executable).parent
TRANSPORTS = ["stdio", "http"]
TENANT = "acme"
TOKENS = {
    "alice-operator-acme-token": {"principal_id": "alice", "tenant_id": TENANT, "roles": ["operator"]},
    "olga-operator-acme-token": {"principal_id": "olga", "tenant_id": TENANT, "roles": ["operator"]},
    "mallory-operator-globex-01": {"principal_id": "mallory", "tenant_id": "globex", "roles": ["operator"]},
    "alice-operator-globex-token": {"principal_id": "alice", "tenant_id": "globex", "roles": ["operator"]},
    "ava-agent-acme-token-0001": {"principal_id": "ava", "tenant_id": TENANT, "roles": ["agent"]},
}
ALICE, OLGA, MALLORY, ALICE_OF_GLOBEX, AVA = list(TOKENS)
WAIT_SECONDS = 60


def hostile(*flags: str, called: Path | None = None) -> dict[str, Any]:
    """A config server entry for the hostile server with `flags`, recording its calls in `called`."""
    extra = ("--called-file", str(called)) if called else ()
    return stdio(HOSTILE, *flags, *extra)


@contextlib.contextmanager
def hostile_over_http(*flags: str, called: Path | None = None) -> Iterator[dict[str, Any]]:
    """The hostile server over Streamable HTTP for the block; yields its config server entry."""
    port = free_port()
    extra = ["--called-file", str(called)] if called else []
    command = [sys.executable, str(HOSTILE), "--http", "--port", str(port), *flags, *extra]
    proc = subprocess.Popen(command, cwd=ROOT)
    try:
        wait_for_port(port, proc)
        yield {"url": f"http://127.0.0.1:{port}/mcp"}
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def peak_memory_bytes(pid: int) -> int:
    """The process's peak resident memory so far (VmHWM)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmHWM for process {pid}")


def proxy_pid(guarded: Guarded) -> int:
    """The process serving the agents: `serve` (http), or the `semantic-saga proxy` started for this config."""
    if guarded.transport == "http":
        return guarded.procs[0].pid
    return stdio_proxy_pid(guarded.config)


def stdio_proxy_pid(config: Path) -> int:
    """The pid of the `semantic-saga proxy` process serving `config` (found by its command line)."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"proxy" in argv and str(config).encode() in argv:
            return int(entry.name)
    raise AssertionError(f"no semantic-saga proxy process serves {config}")


@dataclass
class Guarded:
    """One proxy under attack and its downstream's record of what reached it."""

    transport: str
    config: Path
    called: Path
    env: dict[str, str]
    base: str = ""  # http: where `serve` listens
    log: Path | None = None
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"{self.base}/proxy/mcp"

    def calls(self) -> list[dict[str, Any]]:
        """What reached the hostile server, in order."""
        if not self.called.exists():
            return []
        return [json.loads(line) for line in self.called.read_text().splitlines() if line.strip()]

    @contextlib.asynccontextmanager
    async def agent(
        self, token: str = ALICE, *, mode: str = "legacy", agent: Agent | None = None, **options: Any
    ) -> AsyncIterator[Client]:
        """An agent connected to the proxy (stdio: a `semantic-saga proxy` process of its own, logging to
        `self.log`)."""
        callbacks = {**(agent or Agent()).callbacks(), **options}
        if self.transport == "stdio":
            params = StdioServerParameters(
                command=str(BIN / "semantic-saga"),
                args=["proxy", "--config", str(self.config)],
                env=self.env,
                cwd=str(ROOT),
            )
            assert self.log is not None
            with self.log.open("a", encoding="utf-8") as errlog:
                async with Client(stdio_client(params, errlog=errlog), mode=mode, cache=None, **callbacks) as client:
                    yield client
            return
        headers = {"Authorization": f"Bearer {token}"}
        async with (
            httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30.0, read=120.0)) as http,
            Client(streamable_http_client(self.url, http_client=http), mode=mode, cache=None, **callbacks) as client,
        ):
            yield client

    def http(self, token: str) -> httpx.Client:
        """A REST client of the same `serve` (http only)."""
        return httpx.Client(base_url=self.base, headers={"Authorization": f"Bearer {token}"}, timeout=30)


def _env(workdir: Path, **extra: str) -> dict[str, str]:
    tokens = workdir / "tokens.json"
    tokens.write_text(json.dumps({"tokens": TOKENS}))
    return {
        **os.environ,
        "DATABASE_URL": shared_database_url(),
        "SAGA_DEFAULT_TENANT": TENANT,
        "SAGA_AUTH_MODE": "static",
        "SAGA_AUTH_STATIC_TOKENS": str(tokens),
        "NO_COLOR": "1",
        **extra,
    }


@contextlib.contextmanager
def guarded_proxy(
    transport: str,
    workdir: Path,
    servers: dict[str, Any] | None = None,
    *,
    env: dict[str, str] | None = None,
    **extra: Any,
) -> Iterator[Guarded]:
    """A proxy in front of `servers` (default: one hostile server "h" recording to workdir/called.jsonl), with the
    config's other keys from `extra`. For http, `serve` runs for the block."""
    called = workdir / "called.jsonl"
    config = workdir / f"proxy-{time.monotonic_ns()}.json"
    config.write_text(json.dumps({"servers": servers or {"h": hostile(called=called)}, **extra}))
    guarded = Guarded(transport, config, called, _env(workdir, **(env or {})), log=workdir / f"{transport}.log")
    if transport == "stdio":
        yield guarded
        return
    port = free_port()
    guarded.base = f"http://127.0.0.1:{port}"
    guarded.env.update(SAGA_PROXY_CONFIG=str(config), SAGA_PUBLIC_URL=guarded.base)
    command = [sys.executable, "-m", "saga_project.cli", "serve", "--port", str(port), "--log-level", "warning"]
    with guarded.log.open("ab") as out:
        proc = subprocess.Popen(command, cwd=ROOT, env=guarded.env, stdout=out, stderr=subprocess.STDOUT)
    guarded.procs.append(proc)
    try:
        wait_healthy(guarded.base, proc, guarded.log or workdir / "serve.log", READY_SECONDS)
        yield guarded
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def held_node(status: str = "WAITING_APPROVAL") -> Any:
    """The held call's node, once there is one in `status` (polled)."""
    from sagas.models import Node

    return poll(lambda: Node.objects.filter(key__startswith="proxy-call-", status=status).first(), f"a {status} call")


def poll(find: Callable[[], Any], what: str, seconds: float = WAIT_SECONDS) -> Any:
    """`find()` until it answers something truthy (closing this thread's database connection after each try)."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            found = find()
        finally:
            connections.close_all()
        if found:
            return found
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def stateless_call(
    url: str,
    token: str,
    tool: str,
    arguments: dict[str, Any],
    capabilities: dict[str, Any] | None = None,
    **retry: Any,
) -> dict[str, Any]:
    """One 2026-07-28 tools/call as one POST (no session), written by hand (`retry`: the inputResponses and
    requestState of a call answered input_required); its JSON-RPC result."""
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": capabilities or {},
        "io.modelcontextprotocol/clientInfo": {"name": "hand-written", "version": "1"},
    }
    params = {"name": tool, "arguments": arguments, "_meta": meta, **retry}
    headers = {
        "Authorization": f"Bearer {token}",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": "2026-07-28",
        "Mcp-Method": "tools/call",
        "Mcp-Name": tool,
    }
    answer = httpx.post(
        url, json={"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}, headers=headers, timeout=30
    )
    assert answer.status_code == 200, answer.text
    result: dict[str, Any] = answer.json()["result"]
    return result
