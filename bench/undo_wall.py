"""An undo's wall time beside the session it undoes: N writes through the proxy, then `semantic-saga undo` of them.

    .venv/bin/python bench/undo_wall.py [--calls 100 1000]

A local user's set-up: a fresh per-user home (SAGA_HOME under bench/.work, SQLite), `semantic-saga proxy` over
stdio in front of a CRM that answers text JSON only (tests/proxy/toybox_server.py, Sagaz's toybox shape) with
Sagaz's toybox pack, driven by the official `mcp` client. For each N: the session's N `create_contact` calls are
timed from the first call to the last answer, then `semantic-saga undo --json` is timed as a person runs it (its
own process, wall clock), and the world is checked empty again. Prints one row per N and writes
bench/results/undo-<date>.json. The issue's goal: an undo of N calls within about twice the time the calls took.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import anyio

from bench import common
from bench.cli_wall import cli_env

BIN = Path(sys.executable).parent
TOYBOX = common.ROOT / "tests" / "proxy" / "toybox_server.py"
PACK = common.ROOT / "tests" / "proxy" / "fixtures" / "sagaz" / "packages" / "toybox" / "sagaz-pack.json"
RESULTS = common.ROOT / "bench" / "results"
UNDO_SECONDS = 3600.0


def _setup(work: Path) -> tuple[Path, Path, dict[str, str]]:
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    world = work / "toybox.json"
    world.write_text(json.dumps({"contacts": {}, "next": 1, "seen": {}}))
    server = {"command": sys.executable, "args": [str(TOYBOX), "--state", str(world)]}
    config = work / "saga.json"
    config.write_text(json.dumps({"servers": {"toybox": server}, "packs": [str(PACK)]}))
    return world, config, cli_env(work / "home")


async def _session(config: Path, env: dict[str, str], calls: int) -> float:
    """The N writes of one session through the proxy; seconds from the first call to the last answer."""
    from mcp import Client, StdioServerParameters
    from mcp.client.stdio import stdio_client

    params = StdioServerParameters(command=str(BIN / "semantic-saga"), args=["proxy", "--config", str(config)], env=env)
    async with Client(stdio_client(params)) as client:
        started = time.perf_counter()
        for n in range(calls):
            answer = await client.call_tool("create_contact", {"name": f"N{n}", "email": f"n{n}@example.com"})
            assert not answer.is_error, answer
        return time.perf_counter() - started


def measure(calls: int) -> dict[str, Any]:
    world, config, env = _setup(common.WORK / f"undo-{calls}")
    common.progress(f"undo-wall: a session of {calls} create_contact calls through the proxy")
    session_seconds = anyio.run(_session, config, env, calls)
    common.progress(f"undo-wall: undoing them ({session_seconds:.1f} s of calls)")
    started = time.perf_counter()
    done = subprocess.run(
        [str(BIN / "semantic-saga"), "undo", "--json"], env=env, capture_output=True, text=True, timeout=UNDO_SECONDS
    )
    undo_seconds = time.perf_counter() - started
    report = json.loads(done.stdout)
    undone = sum(1 for item in report["items"] if item["verdict"] == "undone")
    left = json.loads(world.read_text())["contacts"]
    assert done.returncode == 0 and undone == calls and not left, (done.returncode, undone, len(left), done.stderr)
    return {
        "calls": calls,
        "session_seconds": round(session_seconds, 3),
        "undo_seconds": round(undo_seconds, 3),
        "ratio": round(undo_seconds / session_seconds, 2),
        "per_inverse_ms": round(undo_seconds / calls * 1000, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, nargs="+", default=[100, 1000])
    options = parser.parse_args()
    rows = [measure(calls) for calls in options.calls]
    print(f"{'calls':>6}  {'session':>9}  {'undo':>9}  {'undo/session':>12}  {'per inverse':>11}")
    for row in rows:
        print(
            f"{row['calls']:>6}  {row['session_seconds']:>8.2f}s  {row['undo_seconds']:>8.2f}s  "
            f"{row['ratio']:>11.2f}x  {row['per_inverse_ms']:>9.1f}ms"
        )
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / f"undo-{dt.date.today().isoformat()}.json"
    out.write_text(json.dumps({"rows": rows}, indent=1) + "\n")
    common.progress(f"undo-wall: wrote {out.relative_to(common.ROOT)}")


if __name__ == "__main__":
    main()
