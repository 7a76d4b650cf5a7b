"""What the proxy adds to a tool call (issue 41): a read and a write, directly and through the proxy, over stdio and
over Streamable HTTP.

Over stdio the downstream is bench/raw_stdio_downstream.py, an MCP server without the SDK that answers in
microseconds, so the direct figure is the client and the pipe, and the proxied figure minus it is what
`semantic-saga proxy` adds. Direct: the official `mcp` client spawns the downstream over stdio. Proxied: the same
client spawns `semantic-saga proxy --config` (the downstream as a stdio server, `"trust": "first-use"`, both tools
gated allow), which spawns the downstream. Over HTTP the downstream is its twin bench/raw_http_downstream.py under
uvicorn; direct: the `mcp` client (Streamable HTTP, 2025-11-25) calls it; proxied: the same client calls
`semantic-saga serve` with SAGA_PROXY_CONFIG naming it (one served process per journal, started before the rounds,
bearer tokens on both hops). Journal on the embedded SQLite (a SAGA_HOME of its own, new each run) or on PostgreSQL
(the database `bench_proxy_latency`, created and migrated here). `list_contacts` is a read (journaled behind its
answer), `create_contact` a write (class unknown, gate allow: journaled ahead).

One session per round and side (opening it, and the processes it spawns, untimed; one warm-up call of each
tool), then `--reads` reads one after another, a pause of `--settle` seconds (the read journal drains), then
`--writes` writes; sides alternate direct, proxied / proxied, direct round by round.

`.venv/bin/python -m bench.proxy_latency [--rounds N] [--reads R] [--writes W] [--databases sqlite,postgresql]
[--transports stdio,http]` prints p50 (median of the per-round medians), p99 (pooled), the p50 added over direct
and the ratio.
`--gap S` pauses S seconds after each timed call (calls apart, not back to back: the read journal writes in the
pauses). `--wrap "py-spy record -o out.txt --format raw --"` runs the proxy under that command prefix (for profiling).
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx2
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from bench import common
from bench.common import Children, free_port, median, progress, saga_env
from bench.mcp_roundtrip import PRINCIPAL, TOKEN, wait_ready
from bench.mcp_surfaces import home_env

READ_TOOL = "list_contacts"
WRITE_TOOL = "create_contact"
PG_DB = "bench_proxy_latency"
DATABASES = ("sqlite", "postgresql")
TRANSPORTS = ("stdio", "http")
SCRIPT = str(Path(sys.executable).parent / "semantic-saga")
DOWNSTREAM = [sys.executable, "-m", "bench.raw_stdio_downstream"]
WORK = common.WORK / "proxy-latency"


def server_name() -> str:
    """The downstream's name, from a digest of its source: the proxy pins a server's tools on first use (kept in
    PostgreSQL across runs), so a changed downstream is a new server rather than a held call."""
    source = (common.ROOT / "bench" / "raw_stdio_downstream.py").read_bytes()
    return "raw_" + hashlib.sha256(source).hexdigest()[:8]


def proxy_config(downstream_url: str | None = None) -> dict[str, Any]:
    """The stdio downstream, or the HTTP one at `downstream_url` (with the bench's bearer token)."""
    server: dict[str, Any] = {"command": DOWNSTREAM[0], "args": DOWNSTREAM[1:], "cwd": str(common.ROOT)}
    if downstream_url is not None:
        server = {"url": downstream_url, "headers": {"Authorization": f"Bearer {TOKEN}"}}
    server["trust"] = "first-use"
    rules = [
        {"tool": READ_TOOL, "action": "allow", "reason": "the benchmark's read"},
        {"tool": WRITE_TOOL, "action": "allow", "reason": "the benchmark's write"},
    ]
    return {"servers": {server_name(): server}, "policy": {"tools": rules}}


def prepare_postgresql() -> None:
    """Create (if need be) and migrate the benchmark's own PostgreSQL database."""
    common.ensure_database(PG_DB)
    env = saga_env(DATABASE_URL=common.pg_url(PG_DB))
    command = [sys.executable, "manage.py", "migrate", "--verbosity", "0", "--no-input"]
    subprocess.run(command, cwd=common.ROOT, env=env, check=True, timeout=600)


def params(side: str, database: str, config: Path, home: Path, wrap: list[str]) -> StdioServerParameters:
    if side == "direct":
        return StdioServerParameters(command=DOWNSTREAM[0], args=DOWNSTREAM[1:], env=saga_env(), cwd=str(common.ROOT))
    command = [*wrap, SCRIPT, "proxy", "--config", str(config)]
    return StdioServerParameters(command=command[0], args=command[1:], env=journal_env(database, home), cwd=str(WORK))


def journal_env(database: str, home: Path, **extra: str) -> dict[str, str]:
    return home_env(home, **extra) if database == "sqlite" else saga_env(DATABASE_URL=common.pg_url(PG_DB), **extra)


def label(transport: str, database: str) -> str:
    """The journal's name in the samples' keys: the database over stdio, `http-<database>` over HTTP."""
    return database if transport == "stdio" else f"http-{database}"


class HttpServers:
    """The raw HTTP downstream and one `semantic-saga serve` per journal in front of it, for the whole run."""

    def __init__(self, databases: list[str], home: Path, wrap: list[str]) -> None:
        self.children = Children(WORK / "http-logs")
        self.children.log_dir.mkdir(parents=True, exist_ok=True)
        port = free_port()
        command = [sys.executable, "-m", "bench.raw_http_downstream", "--port", str(port), "--token", TOKEN]
        self.direct = f"http://127.0.0.1:{port}/mcp"
        self.proxies: dict[str, str] = {}
        try:
            wait_ready(self.children.start("raw-http-downstream", command, saga_env()), self.direct)
            config = WORK / "proxy-latency-http.json"
            config.write_text(json.dumps(proxy_config(self.direct)))
            tokens = WORK / "proxy-latency-tokens.json"
            tokens.write_text(json.dumps({"tokens": {TOKEN: PRINCIPAL}}))
            for database in databases:
                self._serve(database, home, config, tokens, wrap)
        except BaseException:
            self.children.stop_all()
            raise

    def _serve(self, database: str, home: Path, config: Path, tokens: Path, wrap: list[str]) -> None:
        port = free_port()
        env = journal_env(
            database,
            home,
            SAGA_AUTH_MODE="static",
            SAGA_AUTH_STATIC_TOKENS=str(tokens),
            SAGA_PUBLIC_URL=f"http://127.0.0.1:{port}",
            SAGA_PROXY_CONFIG=str(config),
            SAGA_SWEEP_INTERVAL_SECONDS="86400",
        )
        command = [*wrap, SCRIPT, "serve", "--port", str(port), "--log-level", "warning"]
        self.proxies[database] = f"http://127.0.0.1:{port}/proxy/mcp"
        wait_ready(self.children.start(f"proxy-http-{database}", command, env), self.proxies[database])

    def url(self, side: str, database: str) -> str:
        return self.direct if side == "direct" else self.proxies[database]


async def _call(client: Client, tool: str, arguments: dict[str, Any]) -> None:
    result = await client.call_tool(tool, arguments)
    if result.is_error:
        text = result.content[0].text if result.content else result  # type: ignore[union-attr]
        raise RuntimeError(f"{tool} failed: {text}")


async def _session(
    server: StdioServerParameters | str, reads: int, writes: int, settle: float, gap: float = 0.0
) -> tuple[list[float], list[float]]:
    """Seconds per read and per write over one session (the warm-up calls untimed); `server` is a stdio server to
    spawn or a Streamable HTTP URL."""
    if isinstance(server, str):
        headers = {"Authorization": f"Bearer {TOKEN}"}
        async with (
            httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30.0, read=60.0)) as http,
            Client(streamable_http_client(server, http_client=http), mode="legacy") as client,
        ):
            return await _timed(client, reads, writes, settle, gap)
    async with Client(server, mode="legacy") as client:
        return await _timed(client, reads, writes, settle, gap)


async def _timed(client: Client, reads: int, writes: int, settle: float, gap: float) -> tuple[list[float], list[float]]:
    read_samples: list[float] = []
    write_samples: list[float] = []
    await _call(client, READ_TOOL, {})
    await _call(client, WRITE_TOOL, {"name": "warm-up"})
    await asyncio.sleep(settle)
    for _ in range(reads):
        started = time.perf_counter()
        await _call(client, READ_TOOL, {})
        read_samples.append(time.perf_counter() - started)
        if gap:
            await asyncio.sleep(gap)
    await asyncio.sleep(settle)
    for n in range(writes):
        started = time.perf_counter()
        await _call(client, WRITE_TOOL, {"name": f"Contact {n}", "email": f"c{n}@example.com"})
        write_samples.append(time.perf_counter() - started)
        if gap:
            await asyncio.sleep(gap)
    return read_samples, write_samples


def measure(
    rounds: int,
    reads: int,
    writes: int,
    settle: float,
    databases: list[str],
    wrap: list[str],
    gap: float = 0.0,
    transports: tuple[str, ...] = TRANSPORTS,
) -> dict[str, list[list[float]]]:
    """Per "<side>/<journal>/<read|write>" (side direct or proxied, journal as `label` names it), the per-round
    samples in seconds."""
    WORK.mkdir(parents=True, exist_ok=True)
    config = WORK / "proxy-latency.json"
    config.write_text(json.dumps(proxy_config()))
    home = Path(tempfile.mkdtemp(prefix="home-", dir=WORK))  # a fresh SQLite journal per run
    http = HttpServers(databases, home, wrap) if "http" in transports else None
    out: dict[str, list[list[float]]] = {}
    try:
        for round_no in range(rounds):
            for transport in transports:
                for database in databases:
                    _round(out, round_no, transport, database, (config, home, wrap, http), (reads, writes, settle, gap))
    finally:
        if http is not None:
            http.children.stop_all()
    return out


def _round(
    out: dict[str, list[list[float]]],
    round_no: int,
    transport: str,
    database: str,
    where: tuple[Path, Path, list[str], HttpServers | None],
    calls: tuple[int, int, float, float],
) -> None:
    config, home, wrap, http = where
    journal = label(transport, database)
    sides = ("direct", "proxied") if round_no % 2 == 0 else ("proxied", "direct")
    for side in sides:
        server = http.url(side, database) if http is not None and transport == "http" else None
        read_samples, write_samples = asyncio.run(
            _session(server or params(side, database, config, home, wrap), *calls)
        )
        out.setdefault(f"{side}/{journal}/read", []).append(read_samples)
        out.setdefault(f"{side}/{journal}/write", []).append(write_samples)
    figures = ", ".join(
        f"{side} {kind} {median(out[f'{side}/{journal}/{kind}'][-1]) * 1000:.2f} ms"
        for side in ("direct", "proxied")
        for kind in ("read", "write")
    )
    progress(f"proxy-latency round {round_no + 1} {journal}: {figures}")


def table(samples: dict[str, list[list[float]]], journals: list[str]) -> str:
    header = ["journal", "call", "side", "p50 ms", "p99 ms", "added p50 ms", "added p99 ms", "ratio p50", "n"]
    rows = []
    for database in journals:
        for kind in ("read", "write"):
            direct = common.summarize(samples[f"direct/{database}/{kind}"])
            proxied = common.summarize(samples[f"proxied/{database}/{kind}"])
            ratio = common.paired_ratio(proxied.round_medians, direct.round_medians)
            # Added: the median of the per-round differences (each round's sides were taken side by side).
            added = median(p - d for p, d in zip(proxied.round_medians, direct.round_medians, strict=False))
            label = f"{kind} ({READ_TOOL if kind == 'read' else WRITE_TOOL})"
            rows.append([database, label, "direct", f"{direct.p50 * 1000:.3f}", f"{direct.p99 * 1000:.3f}"])
            rows[-1] += ["", "", "", str(direct.n)]
            rows.append([database, label, "proxied", f"{proxied.p50 * 1000:.3f}", f"{proxied.p99 * 1000:.3f}"])
            rows[-1] += [f"{added * 1000:+.3f}", f"{(proxied.p99 - direct.p99) * 1000:+.3f}", f"{ratio:.2f}x"]
            rows[-1] += [str(proxied.n)]
    return common.markdown_table(header, rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--reads", type=int, default=200)
    parser.add_argument("--writes", type=int, default=200)
    parser.add_argument("--settle", type=float, default=1.5, help="seconds between the reads and the writes")
    parser.add_argument("--gap", type=float, default=0.0, help="seconds of pause after each timed call")
    parser.add_argument("--databases", default=",".join(DATABASES))
    parser.add_argument("--transports", default=",".join(TRANSPORTS))
    parser.add_argument("--wrap", default="", help="a command prefix for the proxy (e.g. a profiler)")
    args = parser.parse_args()
    databases = [d for d in args.databases.split(",") if d]
    transports = tuple(t for t in args.transports.split(",") if t)
    if unknown := (set(databases) - set(DATABASES)) | (set(transports) - set(TRANSPORTS)):
        parser.error(f"unknown database(s) or transport(s): {', '.join(sorted(unknown))}")
    if "postgresql" in databases:
        prepare_postgresql()
    wrap = shlex.split(args.wrap)
    samples = measure(args.rounds, args.reads, args.writes, args.settle, databases, wrap, args.gap, transports)
    print(table(samples, [label(t, d) for t in transports for d in databases]))
    load = common.machine()["loadavg"]
    print(f"\n{common.machine()['nproc']} cores, load average {load[0]:.2f} at the end; p99 pooled over rounds")


if __name__ == "__main__":
    main()
