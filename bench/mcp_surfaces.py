"""MCP over Streamable HTTP as clients use it: the official `mcp` client, both protocol eras, SQLite and PostgreSQL.

Ours: `semantic-saga serve` twice, once on the embedded SQLite default (a SAGA_HOME of its own, no DATABASE_URL)
and once on the bench's PostgreSQL database (saga_bench). Bare: bench/mcp_bare.py twice, with `--database` on a
SQLite file and on saga_bench, its `read_row` one SELECT and its `write_row` one INSERT+COMMIT (the shape of
semantic-saga-mcp: one write per tool call).

Workloads, each one iteration of timed calls on one session (the first iteration untimed):
- read: ours `get_saga` on an existing saga; bare `read_row`.
- linear: ours begin_saga, 5 x execute_saga_step(create_text_file, unique paths), commit_saga; bare 7 x write_row.
- dag: ours begin_saga, 8 x plan_saga_step (a -> b1..b6 -> z, depends_on), run_ready_steps(max_parallel=4) until
  all 8 nodes completed, commit_saga; bare as many write_row calls as ours made (11 when one run settles them).

Eras: `legacy` (mode="legacy", the initialize handshake, 2025-11-25) and `modern` (mode="auto", which probes
server/discover and lands on 2026-07-28, checked). Rounds alternate ours and bare, the first side swapped each round.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from bench import common
from bench.common import Child, Children, free_port, median, progress, saga_env
from bench.mcp_roundtrip import PRINCIPAL, TOKEN, _call, wait_ready

ERAS = {"legacy": ("legacy", "2025-11-25"), "modern": ("auto", "2026-07-28")}
DATABASES = ("sqlite", "postgresql")
WORKLOADS = ("read", "linear", "dag")
LINEAR_STEPS = 5
DAG_MIDDLE = 6  # a -> b1..b6 -> z: 8 nodes
DAG_NODES = DAG_MIDDLE + 2
MAX_RUNS = 10


def home_env(home: Path, **extra: str) -> dict[str, str]:
    """saga_env without DATABASE_URL: the process uses (creates, migrates) the embedded SQLite database of `home`."""
    env = saga_env(**extra)
    env.pop("DATABASE_URL", None)
    env["SAGA_HOME"] = str(home)
    return env


def key(workload: str, database: str, era: str) -> str:
    return f"{workload}/{database}/{era}"


def start_ours(children: Children, database: str) -> tuple[Child, str]:
    port = free_port()
    children.log_dir.mkdir(parents=True, exist_ok=True)
    tokens = children.log_dir / f"tokens-{database}.json"
    tokens.write_text(json.dumps({"tokens": {TOKEN: PRINCIPAL}}))
    settings = {
        "SAGA_AUTH_MODE": "static",
        "SAGA_AUTH_STATIC_TOKENS": str(tokens),
        "SAGA_PUBLIC_URL": f"http://127.0.0.1:{port}",
        "SAGA_SWEEP_INTERVAL_SECONDS": "86400",  # as in bench/mcp_roundtrip.py: the sweeper stays out of the run
        "SAGA_FILE_ROOT": str(common.WORK / f"files-{database}"),
    }
    home = common.WORK / "home-mcp-sqlite"
    env = home_env(home, **settings) if database == "sqlite" else saga_env(**settings)
    command = [sys.executable, "-m", "saga_project.cli", "serve", "--port", str(port), "--log-level", "warning"]
    return children.start(f"mcp-ours-{database}", command, env), f"http://127.0.0.1:{port}/mcp"


def bare_database(database: str) -> str:
    if database == "sqlite":
        common.WORK.mkdir(parents=True, exist_ok=True)
        return f"sqlite:///{common.WORK / 'bare-mcp.sqlite3'}"
    return common.pg_url(common.SAGA_DB)


def start_bare(children: Children, database: str) -> tuple[Child, str]:
    port = free_port()
    command = [sys.executable, "-m", "bench.mcp_bare", "--port", str(port), "--token", TOKEN]
    command += ["--database", bare_database(database)]
    return children.start(f"mcp-bare-{database}", command, saga_env()), f"http://127.0.0.1:{port}/mcp"


@dataclass
class Servers:
    # (side, database) -> (child, url)
    started: dict[tuple[str, str], tuple[Child, str]] = field(default_factory=dict)

    def wait(self) -> None:
        for child, url in self.started.values():
            wait_ready(child, url)

    def stop(self) -> None:
        for child, _ in self.started.values():
            child.stop()

    def url(self, side: str, database: str) -> str:
        return self.started[(side, database)][1]


def start_all(children: Children) -> Servers:
    servers = Servers()
    for database in DATABASES:
        servers.started[("ours", database)] = start_ours(children, database)
        servers.started[("bare", database)] = start_bare(children, database)
    return servers


# --- the workloads ---------------------------------------------------------------------------------------------------


def _text_file() -> dict[str, Any]:
    return {"path": f"bench-{uuid.uuid4().hex}.txt", "content": "bench"}


def dag_plan() -> list[tuple[str, list[str]]]:
    """(key, depends_on) of the 8-node DAG: a root, six nodes after it, one node after all six."""
    middle = [f"b{n}" for n in range(1, DAG_MIDDLE + 1)]
    return [("a", []), *((m, ["a"]) for m in middle), ("z", middle)]


class Workloads:
    """One iteration of each workload on each side; `calls` counts ours' DAG calls so bare makes as many."""

    def __init__(self) -> None:
        self.dag_calls = 1 + DAG_NODES + 1 + 1
        self.read_saga: dict[str, str] = {}  # url -> an existing saga id

    async def prepare(self, client: Client, url: str, side: str) -> None:
        if side == "ours" and url not in self.read_saga:
            saga = await _call(client, "begin_saga", {"metadata": {"bench": "read"}})
            self.read_saga[url] = saga["id"]

    def step(self, workload: str, side: str, url: str) -> Callable[[Client], Awaitable[None]]:
        if side == "bare":
            count = {"read": 1, "linear": LINEAR_STEPS + 2, "dag": self.dag_calls}[workload]
            tool = "read_row" if workload == "read" else "write_row"

            async def bare(client: Client) -> None:
                for n in range(count):
                    arguments = {"row_id": 1} if workload == "read" else {"saga_id": "s", "action": f"c{n}"}
                    await _call(client, tool, arguments)

            return bare
        if workload == "read":
            return lambda client: self._read(client, url)
        return self._linear if workload == "linear" else self._dag

    async def _read(self, client: Client, url: str) -> None:
        await _call(client, "get_saga", {"saga_id": self.read_saga[url]})

    async def _linear(self, client: Client) -> None:
        saga = (await _call(client, "begin_saga", {"metadata": {"bench": "linear"}}))["id"]
        for _ in range(LINEAR_STEPS):
            await _call(
                client, "execute_saga_step", {"saga_id": saga, "action": "create_text_file", "input": _text_file()}
            )
        await _call(client, "commit_saga", {"saga_id": saga})

    async def _dag(self, client: Client) -> None:
        saga = (await _call(client, "begin_saga", {"metadata": {"bench": "dag"}}))["id"]
        for node, after in dag_plan():
            arguments = {"saga_id": saga, "action": "create_text_file", "input": _text_file(), "key": node}
            await _call(client, "plan_saga_step", {**arguments, "depends_on": after})
        calls = 1 + DAG_NODES
        for _ in range(MAX_RUNS):
            answer = await _call(client, "run_ready_steps", {"saga_id": saga, "max_parallel": 4})
            calls += 1
            if answer.get("run", {}).get("node_counts", {}).get("COMPLETED") == DAG_NODES:
                break
        else:
            raise RuntimeError(f"the DAG did not complete in {MAX_RUNS} runs: {answer.get('run')}")
        await _call(client, "commit_saga", {"saga_id": saga})
        self.dag_calls = calls + 1


async def _session(url: str, era: str, iterations: int, work: Workloads, workload: str, side: str) -> list[float]:
    mode, expected = ERAS[era]
    headers = {"Authorization": f"Bearer {TOKEN}"}
    samples: list[float] = []
    async with (
        httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30.0, read=120.0)) as http,
        Client(streamable_http_client(url, http_client=http), mode=mode) as client,
    ):
        if client.protocol_version != expected:
            raise RuntimeError(f"{url} in mode {mode}: protocol {client.protocol_version}, expected {expected}")
        await work.prepare(client, url, side)
        step = work.step(workload, side, url)
        await step(client)  # warm-up: the session, the client's tool cache, server-side imports
        for _ in range(iterations):
            started = time.perf_counter()
            await step(client)
            samples.append(time.perf_counter() - started)
    return samples


def measure(servers: Servers, rounds: int, iterations: dict[str, int]) -> dict[str, dict[str, list[list[float]]]]:
    """key(workload, database, era) -> side -> per-round samples (seconds per iteration)."""
    work = Workloads()
    out: dict[str, dict[str, list[list[float]]]] = {}
    for round_no in range(rounds):
        for workload in WORKLOADS:
            for database in DATABASES:
                for era in ERAS:
                    sides = ("ours", "bare") if round_no % 2 == 0 else ("bare", "ours")
                    figure = out.setdefault(key(workload, database, era), {"ours": [], "bare": []})
                    for side in sides:
                        url = servers.url(side, database)
                        n = iterations[workload]
                        figure[side].append(asyncio.run(_session(url, era, n, work, workload, side)))
                    ours, bare = (median(figure[side][-1]) * 1000 for side in ("ours", "bare"))
                    name = key(workload, database, era)
                    progress(f"MCP/HTTP round {round_no + 1}/{rounds} {name}: ours {ours:.1f} ms, bare {bare:.1f} ms")
    out["_meta"] = {"dag_calls": [[float(work.dag_calls)]]}
    return out


def main() -> None:
    """Standalone: `.venv/bin/python -m bench.mcp_surfaces [ROUNDS]`, each workload's p50 ours vs bare."""
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 1
    common.setup_django()
    children = Children(common.WORK / "logs")
    try:
        servers = start_all(children)
        servers.wait()
        figures = measure(servers, rounds, {"read": 10, "linear": 3, "dag": 2})
    finally:
        children.stop_all()
    for name, sides in figures.items():
        if not name.startswith("_"):
            ours, bare = common.summarize(sides["ours"]), common.summarize(sides["bare"])
            ratio = common.paired_ratio(ours.round_medians, bare.round_medians)
            print(f"{name}: ours {ours.p50 * 1000:.1f} ms, bare {bare.p50 * 1000:.1f} ms, {ratio:.2f}x")


if __name__ == "__main__":
    main()
