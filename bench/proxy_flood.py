"""A downstream that floods notifications, against the stdio proxy (issue 39, row 5): what the proxy's memory does
and how long a read on ANOTHER server takes meanwhile.

The proxy is `semantic-saga proxy` (stdio, the journaled path, the bench database), started by the official `mcp`
client as an agent's client starts it, in front of two copies of tests/proxy/hostile_server.py: "h" floods, "calm"
(prefix `calm`) does not (each named with the run's pid in the configuration). Three shapes of flood, each
`--seconds` long:
- `call`: the agent calls `flood` on "h", which floods on that call's own stream (its log messages and progress
  are relayed to the agent), while the agent reads `calm__get_status` again and again;
- `background`: "h" floods from the moment the proxy lists its tools, with no request of the agent in flight (its
  log messages go to the proxy's own log, at LOG_LEVEL INFO as a stdio proxy logs by default);
- `slow-agent`: as `call`, but the agent is a client that reads the proxy's stdout slowly (`--read-rate` bytes a
  second, written by hand over the pipes), as a busy client does: no read on "calm" is timed.

The proxy's resident memory (VmRSS) is sampled every half second; the reads on "calm" are timed before the flood,
during it and after it. Everything runs on 127.0.0.1 (stdio pipes) and stops by itself.

    .venv/bin/python -m bench.proxy_flood [--seconds 20] [--shape call|background|slow-agent] [--kinds all]
"""

from __future__ import annotations

import argparse
import json
import os
import select
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

from bench.common import ROOT, WORK, percentile, progress, saga_env, setup_django

HOSTILE = ROOT / "tests" / "proxy" / "hostile_server.py"
READ_PAUSE_SECONDS = 0.1  # between two timed reads on the calm server
SAMPLE_SECONDS = 0.5  # between two memory samples
PHASE_READS = 20  # reads timed before and after the flood


def slow_agent(command: list[str], env: dict[str, str], seconds: float, read_rate: int, errlog: Any) -> Run:
    """The `slow-agent` shape: a hand-written client that calls `flood` and then reads slowly."""
    run = Run()
    proxy = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=errlog, env=env, cwd=ROOT)
    assert proxy.stdin is not None and proxy.stdout is not None
    try:
        for message in _flood_call_messages(seconds):
            proxy.stdin.write((json.dumps(message) + "\n").encode())
            proxy.stdin.flush()
            if message.get("id") == 1:
                proxy.stdout.readline()  # the initialize answer
        run.flood_began = time.monotonic()
        while time.monotonic() - run.flood_began < seconds + 2:
            ready, _, _ = select.select([proxy.stdout], [], [], 0.1)
            if ready:
                os.read(proxy.stdout.fileno(), max(1, read_rate // 10))
            time.sleep(0.1)
            if not run.rss or time.monotonic() - run.flood_began - run.rss[-1][0] >= SAMPLE_SECONDS:
                run.rss.append((round(time.monotonic() - run.flood_began, 2), rss_bytes(proxy.pid)))
    finally:
        proxy.stdin.close()
        proxy.terminate()
        proxy.wait(30)
    return run


def _flood_call_messages(seconds: float) -> list[dict[str, Any]]:
    info = {"name": "slow-agent", "version": "1"}
    params = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": info}
    call = {"name": "flood", "arguments": {"seconds": seconds}, "_meta": {"progressToken": "flood"}}
    return [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": call},
    ]


def proxy_config(seconds: float, kinds: str, shape: str) -> dict[str, Any]:
    flood = ["--flood", kinds, "--flood-seconds", str(seconds)]
    if shape == "background":
        flood.append("--flood-background")
    # Named for this run: the bench database keeps the tool pins of earlier runs, and a definition changed since one
    # would hold every call of it for a person.
    run = os.getpid()
    return {
        "servers": {
            f"h-{run}": {"command": sys.executable, "args": [str(HOSTILE), *flood]},
            f"calm-{run}": {"command": sys.executable, "args": [str(HOSTILE)], "prefix": "calm"},
        }
    }


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmRSS for process {pid}")


def proxy_pid(config: Path) -> int:
    """The `semantic-saga proxy` process serving `config` (found by its command line)."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"proxy" in argv and str(config).encode() in argv:
            return int(entry.name)
    raise RuntimeError(f"no semantic-saga proxy process serves {config}")


class Run:
    """What one run measured."""

    def __init__(self) -> None:
        self.reads: dict[str, list[float]] = {"before": [], "during": [], "after": []}
        self.rss: list[tuple[float, int]] = []  # (seconds since the flood began, bytes)
        self.phase = "before"
        self.flood_began = 0.0
        self.flood_answer = ""  # what `flood` answered (how many it sent), in the `call` shape

    async def read(self, client: Client) -> None:
        started = time.perf_counter()
        result = await client.call_tool("calm__get_status", {})
        if result.is_error:
            raise RuntimeError(f"the read on the calm server failed: {result.content}")
        self.reads[self.phase].append(time.perf_counter() - started)

    async def sample(self, pid: int, until: anyio.Event) -> None:
        while not until.is_set():
            self.rss.append((round(time.monotonic() - self.flood_began, 2), rss_bytes(pid)))
            with anyio.move_on_after(SAMPLE_SECONDS):
                await until.wait()

    def summary(self) -> dict[str, Any]:
        def ms(samples: list[float]) -> dict[str, Any]:
            if not samples:
                return {"n": 0}
            return {
                "n": len(samples),
                "p50_ms": round(percentile(samples, 50) * 1000, 1),
                "p99_ms": round(percentile(samples, 99) * 1000, 1),
                "max_ms": round(max(samples) * 1000, 1),
            }

        sizes = [size for _, size in self.rss]
        return {
            "flood_answer": self.flood_answer,
            "reads_on_the_calm_server": {phase: ms(samples) for phase, samples in self.reads.items()},
            "rss_mib": {
                "at_flood_start": round(sizes[0] / 2**20, 1) if sizes else None,
                "peak": round(max(sizes) / 2**20, 1) if sizes else None,
                "at_end": round(sizes[-1] / 2**20, 1) if sizes else None,
            },
            "rss_samples": [(at, round(size / 2**20, 1)) for at, size in self.rss],
        }


async def _scenario(params: StdioServerParameters, config: Path, seconds: float, shape: str, errlog: Any) -> Run:
    run = Run()
    async with Client(stdio_client(params, errlog=errlog), mode="legacy", cache=None) as client:
        pid = proxy_pid(config)
        if shape == "call":
            for _ in range(PHASE_READS):
                await run.read(client)
        done = anyio.Event()
        run.phase, run.flood_began = "during", time.monotonic()
        async with anyio.create_task_group() as group:
            group.start_soon(run.sample, pid, done)
            if shape == "call":
                group.start_soon(_flood_call, client, seconds, done, run)
            else:
                group.start_soon(_sleep_then_set, seconds, done)
            while not done.is_set():
                await run.read(client)
                await anyio.sleep(READ_PAUSE_SECONDS)
        run.phase = "after"
        for _ in range(PHASE_READS):
            await run.read(client)
        run.rss.append((round(time.monotonic() - run.flood_began, 2), rss_bytes(pid)))
    return run


async def _flood_call(client: Client, seconds: float, done: anyio.Event, run: Run) -> None:
    try:
        answer = await client.call_tool("flood", {"seconds": seconds})
        run.flood_answer = " ".join(getattr(block, "text", "") for block in answer.content)
    finally:
        done.set()


async def _sleep_then_set(seconds: float, done: anyio.Event) -> None:
    await anyio.sleep(seconds)
    done.set()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=20.0, help="how long the flood lasts (default 20)")
    parser.add_argument("--shape", choices=["call", "background", "slow-agent"], default="call")
    parser.add_argument("--read-rate", type=int, default=100_000, help="slow-agent: bytes read a second (100000)")
    parser.add_argument("--kinds", default="all", help="what the downstream floods (tests/proxy/hostile_server.py)")
    parser.add_argument("--log-level", default="INFO", help="the proxy's LOG_LEVEL (default INFO, as a stdio proxy)")
    parser.add_argument("--out", default="", help="also write the figures here (JSON)")
    args = parser.parse_args()
    setup_django()  # the bench database, created and migrated, as the proxy uses it
    logs = WORK / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    config = logs / f"proxy-flood-{os.getpid()}.json"
    config.write_text(json.dumps(proxy_config(args.seconds, args.kinds, args.shape)))
    env = saga_env(LOG_LEVEL=args.log_level, SAGA_DEFAULT_TENANT="acme")
    command = str(Path(sys.executable).parent / "semantic-saga")
    params = StdioServerParameters(command=command, args=["proxy", "--config", str(config)], env=env, cwd=str(ROOT))
    log = logs / "proxy-flood.log"
    progress(f"flood of {args.kinds} ({args.shape}) for {args.seconds:g}s; the proxy logs to {log}")
    with log.open("w", encoding="utf-8") as errlog:
        if args.shape == "slow-agent":
            run = slow_agent([command, *params.args], env, args.seconds, args.read_rate, errlog)
        else:
            run = anyio.run(_scenario, params, config, args.seconds, args.shape, errlog)
    summary = {"seconds": args.seconds, "shape": args.shape, "kinds": args.kinds, **run.summary()}
    print(json.dumps({k: v for k, v in summary.items() if k != "rss_samples"}, indent=2))
    if args.out:
        Path(args.out).write_text(json.dumps(summary, indent=2) + "\n")


if __name__ == "__main__":
    main()
