"""The benchmark suite: one command, every comparison side by side, one table, one JSON file.

Usage: .venv/bin/python bench/run.py [--quick] [--write-docs] (or `make bench`, `make bench-quick`).

Creates and migrates its own PostgreSQL databases (saga_bench for us, dbos_bench for DBOS), starts a private
redis-server and the Celery workers it needs on loopback, and stops them all on the way out. Each concurrency
level runs every system in rounds whose order rotates, so slow drift on a shared machine hits all systems alike;
figures are medians of per-round values, p99 over all samples, and ratios are medians of per-round ratios.
Progress goes to stderr; the table to stdout; the figures to bench/results/<date>[-quick].json.

The surfaces as clients use them, each beside its bare reference in the same rounds (issue 30): mcp-http (the
official client over Streamable HTTP, both protocol eras, SQLite and PostgreSQL: bench/mcp_surfaces.py), a2a
(SendMessage vs a bare a2a-sdk server: bench/a2a_bench.py), proxy-read (the proxy over stdio and HTTP, journal on
SQLite and PostgreSQL: bench/proxy_surfaces.py), cli (bench/cli_wall.py). The report: bench/report.py.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import signal
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import common
from bench.common import median, progress, summarize
from bench.report import Collected, RoundFigure, build_report, docs_section, render

__all__ = ["FULL", "QUICK", "Collected", "Plan", "RoundFigure", "build_report", "docs_section", "main", "render"]

RESULTS = common.ROOT / "bench" / "results"
DOCS = common.ROOT / "docs" / "benchmarks.md"
SYSTEMS = ("bare", "embedded", "celery", "dbos", "celery-chain")
PHASES = "levels,fanout,statements,audit,mcp,mcp-http,a2a,proxy,proxy-read,proxy-added,cli,recovery"


@dataclass(frozen=True)
class Plan:
    name: str
    levels: dict[int, int]  # concurrency -> rounds
    latency_sagas: int  # sagas (workflows, chains) per round at concurrency 1, run one after another
    skip: dict[int, tuple[str, ...]] = field(default_factory=dict)  # systems left out at a level
    bare_ops: int = 200
    fanout_rounds: int = 1
    mcp_rounds: int = 2
    mcp_iterations: int = 30
    proxy_rounds: int = 2
    proxy_iterations: int = 30
    verify_events: int = 20_000
    recovery: tuple[bool, ...] = (False,)  # one trial per entry: idempotent contract or not
    cli_rounds: int = 5  # rounds of every operator verb and a bare interpreter start (bench/cli_wall.py)
    # MCP over HTTP as clients use it (bench/mcp_surfaces.py): rounds, and iterations per session by workload
    surface_rounds: int = 2
    surface_iterations: dict[str, int] = field(default_factory=lambda: {"read": 15, "linear": 4, "dag": 2})
    a2a_iterations: int = 15
    proxy_read_iterations: int = 20  # per session of bench/proxy_surfaces.py (stdio sessions start processes)
    # What the stdio proxy adds to a call of a raw downstream (bench/proxy_latency.py): rounds, reads, writes
    proxy_added: tuple[int, int, int] = (2, 100, 50)


QUICK = Plan(
    name="quick",
    levels={1: 2, 4: 2, 64: 1},
    latency_sagas=2,
    # At today's per-step cost the Celery executor's 64-saga batch alone takes half a minute (and the plain chain
    # at 64 is past its peak): quick mode keeps the 64/4 ratio on the embedded executor and DBOS at 64 (its peak),
    # full mode runs every system at every level.
    skip={64: ("celery", "celery-chain")},
    bare_ops=200,
    fanout_rounds=1,
    mcp_rounds=2,
    mcp_iterations=15,
    proxy_rounds=2,
    proxy_iterations=30,
    verify_events=20_000,
    recovery=(False,),
)
FULL = Plan(
    name="full",
    levels={1: 5, 4: 3, 16: 3, 64: 2},
    latency_sagas=5,
    bare_ops=500,
    fanout_rounds=3,
    mcp_rounds=3,
    mcp_iterations=100,
    proxy_rounds=3,
    proxy_iterations=100,
    verify_events=100_000,
    recovery=(False, True, False, True),
    cli_rounds=10,
    surface_rounds=4,
    surface_iterations={"read": 50, "linear": 12, "dag": 6},
    a2a_iterations=50,
    proxy_read_iterations=100,
    proxy_added=(4, 200, 200),
)


# --- measuring ------------------------------------------------------------------------------------------------------


class Harness:
    def __init__(self, plan: Plan, children: common.Children, skip: set[str]) -> None:
        self.plan = plan
        self.skip = skip
        self.children = children
        self.data = Collected()

    def setup(self) -> None:
        progress("databases: create if missing, migrate, load the example registry")
        common.setup_django()
        from bench.bare import BareInsert
        from bench.celery_chain import CeleryChainBench
        from bench.dbos_chain import DbosBench
        from bench.sagas_chain import SagaBench

        progress("starting a private redis-server and two Celery workers (-c 2): ours and the plain-chain app")
        self.redis = common.start_redis(self.children)
        self.saga_broker = f"{self.redis}/0"
        self.chain_broker = f"{self.redis}/1"
        self.saga_worker = common.launch_celery_worker(
            self.children, "sagas-worker", "saga_project", common.saga_env(CELERY_BROKER_URL=self.saga_broker)
        )
        chain_worker = common.launch_celery_worker(
            self.children,
            "chain-worker",
            "bench.celery_chain",
            common.saga_env(BENCH_CHAIN_BROKER_URL=self.chain_broker),
        )
        self.victims: list[common.Child] = []
        if "recovery" not in self.skip:
            from bench.recovery import launch_victim

            # One Redis database per trial: the only worker on a trial's queue is the one that will be killed.
            self.victim_brokers = [f"{self.redis}/{2 + n}" for n in range(len(self.plan.recovery))]
            self.victims = [
                launch_victim(self.children, url, f"victim-{n}") for n, url in enumerate(self.victim_brokers)
            ]
        if "mcp" not in self.skip:
            from bench import mcp_roundtrip

            progress("starting our server (semantic-saga serve) and a bare MCPServer on loopback")
            self.mcp_servers = (mcp_roundtrip.start_ours(self.children), mcp_roundtrip.start_bare(self.children))
        if {"mcp-http", "a2a"} - self.skip:
            from bench import a2a_bench, mcp_surfaces

            progress("starting semantic-saga serve on SQLite (a home of its own) and on PostgreSQL, bare servers")
            self.surfaces = mcp_surfaces.start_all(self.children)
            self.bare_a2a = {
                database: a2a_bench.start_bare(
                    self.children, mcp_surfaces.bare_database(database), f"a2a-bare-{database}"
                )
                for database in mcp_surfaces.DATABASES
                if "a2a" not in self.skip
            }
        if "proxy" not in self.skip:
            from bench import proxy_roundtrip

            progress("starting a no-op MCP downstream and semantic-saga serve with the proxy in front of it")
            self.proxy_servers = proxy_roundtrip.start_both(self.children)
        progress("launching DBOS Transact (system database dbos_bench)")
        self.dbos = DbosBench()
        self.bare = BareInsert()
        self.sagas = SagaBench(self.saga_broker)
        self.chains = CeleryChainBench(self.chain_broker)
        chains, fanouts = self.sagas_needed()
        progress(f"planning {chains} chained and {fanouts} fan-out sagas ahead (untimed) while the children start")
        self.sagas.prepare("chain", chains)
        self.sagas.prepare("fanout", fanouts)
        common.wait_celery_ready(self.saga_worker)
        common.wait_celery_ready(chain_worker)
        if "mcp" not in self.skip:
            for child, url in self.mcp_servers:
                mcp_roundtrip.wait_ready(child, url)
        if {"mcp-http", "a2a"} - self.skip:
            self.surfaces.wait()
            for child, base in self.bare_a2a.values():
                child.wait_for(lambda b=base: _answers(b), 90, "an answer on its card")

    def sagas_needed(self) -> tuple[int, int]:
        """(chained, fan-out) sagas the planned rounds will run."""
        chains = 0
        for level, rounds in self.plan.levels.items() if "levels" not in self.skip else ():
            executors = [s for s in ("embedded", "celery") if s not in self.plan.skip.get(level, ())]
            chains += rounds * len(executors) * (self.plan.latency_sagas if level == 1 else level)
        fanouts = 0 if "fanout" in self.skip else 2 * self.plan.fanout_rounds
        return chains, fanouts

    # one round of one system at one level
    def measure(self, system: str, level: int) -> RoundFigure:
        if system == "bare":
            return RoundFigure(math.nan, self.bare.round(self.plan.bare_ops))
        batches = self.plan.latency_sagas if level == 1 else 1
        rates: list[float] = []
        samples: list[float] = []
        for _ in range(batches):
            if system in ("embedded", "celery"):
                self.sagas.use(system)
                result = self.sagas.chained(level)
                rates.append(result.steps_per_second)
                samples.extend(result.step_samples)
            elif system == "dbos":
                seconds, steps, intervals = self.dbos.chained(level)
                rates.append(steps / seconds)
                samples.extend(intervals)
            elif system == "celery-chain":
                seconds, tasks = self.chains.chains(level)
                rates.append(tasks / seconds)
                samples.append(seconds / 10 if level == 1 else math.nan)
            else:
                raise ValueError(system)
        return RoundFigure(median(rates), [s for s in samples if not math.isnan(s)])

    def levels(self) -> None:
        for level, rounds in self.plan.levels.items():
            systems = [s for s in SYSTEMS if s not in self.plan.skip.get(level, ()) and (s != "bare" or level == 1)]
            for round_no in range(rounds):
                order = systems[round_no % len(systems) :] + systems[: round_no % len(systems)]
                for system in order:
                    figure = self.measure(system, level)
                    self.data.add(system, level, figure)
                    rate = "" if math.isnan(figure.per_second) else f" {figure.per_second:,.0f}/s"
                    progress(f"concurrency {level:>2} round {round_no + 1}/{rounds} {system:<12}{rate}")

    def fanout(self) -> None:
        for round_no in range(self.plan.fanout_rounds):
            for system in ("embedded", "celery") if round_no % 2 == 0 else ("celery", "embedded"):
                self.sagas.use(system)
                result = self.sagas.fanout()
                self.data.extra.setdefault("fanout", {}).setdefault(system, []).append(
                    {"seconds": result.seconds, "steps_per_second": result.steps_per_second}
                )
                progress(f"fan-out 1->16->1 round {round_no + 1} {system}: {result.seconds * 1000:.0f} ms")
        self.sagas.use("embedded")

    def statements(self) -> None:
        from bench.bare import select_one_round_trip
        from bench.profile_chain import immediate_pair, queries_per_node

        self.sagas.use("embedded")
        self.data.extra["statements"] = queries_per_node()
        self.data.extra["immediate_pair"] = immediate_pair()
        self.data.extra["select_1_round_trip"] = summarize([select_one_round_trip()]).as_dict()
        progress(f"SQL statements per chained node: {self.data.extra['statements']['statements_per_node']:.1f}")
        self.data.extra["new_sessions"] = {"embedded_per_100_steps": self.new_sessions_per_100_steps()}

    def new_sessions_per_100_steps(self) -> float:
        """New PostgreSQL backends while warm chained sagas run on the embedded executor's threads, per 100 steps."""
        ids = self.sagas.take("chain", 20)  # planned before counting: planning starts threads of its own
        # Warm at the same concurrency: the executor's threads, and the pool grown to what they use at once.
        self.sagas.run(ids[:10], max_parallel=1)
        before = common.backends_started()
        result = self.sagas.run(ids[10:], max_parallel=1)
        time.sleep(1.2)  # a backend's connect reaches the statistics at the end of its first transaction
        per_100 = (common.backends_started() - before) / result.steps * 100
        progress(f"new PostgreSQL sessions per 100 warm chained steps: {per_100:.1f}")
        return per_100

    def audit(self) -> None:
        from bench.audit_cost import chain_cost, verify_throughput

        self.data.extra["audit_chain"] = chain_cost(self.sagas.ran_chains[-20:])
        progress(f"verify_audit over {self.plan.verify_events:,} events (written once, kept in saga_bench)")
        self.data.extra["verify"] = verify_throughput(self.plan.verify_events)

    def mcp(self) -> None:
        from bench import mcp_roundtrip

        (ours, ours_url), (bare, bare_url) = self.mcp_servers
        try:
            out: dict[str, list[list[float]]] = {"ours": [], "bare": []}
            started, calls = 0, 0
            for round_no in range(self.plan.mcp_rounds):
                pair = [("ours", ours_url), ("bare", bare_url)]
                for name, url in pair if round_no % 2 == 0 else pair[::-1]:
                    before = common.backends_started()
                    out[name].append(mcp_roundtrip.round_trip(url, self.plan.mcp_iterations, ours=name == "ours"))
                    if name == "ours" and round_no > 0:  # round 1 warms the server's threads and pool
                        time.sleep(1.2)  # as in new_sessions_per_100_steps
                        started += common.backends_started() - before
                        calls += 2 * (self.plan.mcp_iterations + 1)  # the session's untimed first pair too
                    progress(f"MCP round {round_no + 1} {name}: {median(out[name][-1]) * 1000:.1f} ms per 2 calls")
            self.data.extra["mcp"] = out
            sessions = self.data.extra.setdefault("new_sessions", {})
            sessions["mcp_per_100_calls"] = started / calls * 100 if calls else math.nan
        finally:
            ours.stop()
            bare.stop()

    def proxy(self) -> None:
        from bench import proxy_roundtrip

        try:
            samples = proxy_roundtrip.alternate(self.proxy_servers, self.plan.proxy_rounds, self.plan.proxy_iterations)
            self.data.extra["proxy"] = samples
        finally:
            self.proxy_servers.stop()

    def mcp_http(self) -> None:
        from bench import mcp_surfaces

        try:
            rounds, iterations = self.plan.surface_rounds, self.plan.surface_iterations
            self.data.extra["mcp_http"] = mcp_surfaces.measure(self.surfaces, rounds, iterations)
        finally:
            if "a2a" in self.skip:
                self.surfaces.stop()

    def a2a(self) -> None:
        from bench import a2a_bench, mcp_surfaces

        try:
            pairs = {
                database: (self.surfaces.url("ours", database).removesuffix("/mcp"), self.bare_a2a[database][1])
                for database in mcp_surfaces.DATABASES
            }
            figures = a2a_bench.measure(pairs, self.plan.surface_rounds, self.plan.a2a_iterations)
            self.data.extra["a2a"] = figures
        finally:
            self.surfaces.stop()
            for child, _ in self.bare_a2a.values():
                child.stop()

    def proxy_read(self) -> None:
        from bench import proxy_surfaces

        progress("starting an MCP downstream and semantic-saga serve with the proxy on SQLite and on PostgreSQL")
        servers = proxy_surfaces.start_all(self.children)
        try:
            rounds, iterations = self.plan.proxy_rounds, self.plan.proxy_read_iterations
            self.data.extra["proxy_read"] = proxy_surfaces.measure(servers, rounds, iterations)
        finally:
            servers.stop()

    def proxy_added(self) -> None:
        from bench import proxy_latency

        proxy_latency.prepare_postgresql()
        rounds, reads, writes = self.plan.proxy_added
        databases = list(proxy_latency.DATABASES)
        self.data.extra["proxy_added"] = proxy_latency.measure(rounds, reads, writes, 0.5, databases, [])

    def cli(self) -> None:
        from bench import cli_wall

        self.data.extra["cli"] = cli_wall.measure(self.plan.cli_rounds)

    def recovery(self) -> None:
        from bench import recovery

        progress("recovery: a victim worker on its own queue will be SIGKILLed mid-call")
        version = f"1.{int(time.time())}.0"
        trials: list[dict[str, Any]] = []
        with recovery.SlowServer() as server:
            for n, idempotent in enumerate(self.plan.recovery):
                self.sagas.use("celery", self.victim_brokers[n])
                result = recovery.trial(
                    self.children,
                    self.victim_brokers[n],
                    server,
                    idempotent=idempotent,
                    version=f"{version}-t{n}",
                    victim=self.victims[n],
                )
                trials.append(result.__dict__)
                progress(f"recovery ({result.contract}): {result.seconds:.2f} s from SIGKILL to {result.outcome}")
        self.sagas.use("embedded")
        self.data.extra["recovery"] = {
            "lease_seconds": recovery.LEASE_SECONDS,
            "sweep_interval_seconds": recovery.SWEEP_INTERVAL,
            "trials": trials,
        }

    def close(self) -> None:
        for closer in (getattr(self, "dbos", None), getattr(self, "bare", None)):
            if closer is not None:
                try:
                    closer.close()
                except Exception as exc:
                    progress(f"closing {type(closer).__name__}: {exc}")


def _git_head() -> str:
    import subprocess

    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=common.ROOT, capture_output=True, text=True, timeout=10
        )
        return out.stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def _answers(base: str) -> bool:
    import httpx

    try:
        return httpx.get(f"{base}/.well-known/agent-card.json", timeout=2).status_code == 200
    except httpx.TransportError:
        return False


def _jsonable(value: Any) -> Any:
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    return value


def _exit_cleanly(signum: int, frame: object) -> None:
    """SIGTERM (and SIGINT, which a background job inherits as ignored) unwind through the finally that stops
    every child process group."""
    raise SystemExit(128 + signum)


def main(argv: list[str] | None = None) -> int:
    signal.signal(signal.SIGTERM, _exit_cleanly)
    signal.signal(signal.SIGINT, _exit_cleanly)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer rounds and levels (under two minutes)")
    parser.add_argument(
        "--write-docs", action="store_true", help="also rewrite the marked section of docs/benchmarks.md"
    )
    parser.add_argument("--skip", default="", help=f"comma-separated phases to skip ({PHASES})")
    parser.add_argument(
        "--from-json", type=Path, help="with --write-docs: take the table from a saved result instead of running"
    )
    args = parser.parse_args(argv)
    if args.from_json:
        saved = json.loads(args.from_json.read_text())
        DOCS.write_text(common.replace_marked(DOCS.read_text(), docs_section(saved["table"], saved["meta"])))
        progress(f"rewrote the bench section of {DOCS.relative_to(common.ROOT)} from {args.from_json}")
        return 0
    plan = QUICK if args.quick else FULL
    skip = {s.strip() for s in args.skip.split(",") if s.strip()}
    started = time.monotonic()
    load_at_start = common.machine()["loadavg"]
    children = common.Children(common.WORK / "logs")
    harness = Harness(plan, children, skip)
    phases: list[tuple[str, Callable[[], None]]] = [
        ("levels", harness.levels),
        ("fanout", harness.fanout),
        ("statements", harness.statements),
        ("audit", harness.audit),
        ("mcp", harness.mcp),
        ("mcp-http", harness.mcp_http),
        ("a2a", harness.a2a),
        ("proxy", harness.proxy),
        ("proxy-read", harness.proxy_read),
        ("proxy-added", harness.proxy_added),
        ("cli", harness.cli),
        ("recovery", harness.recovery),
    ]
    errors: dict[str, str] = {}
    try:
        harness.setup()
        for name, phase in phases:
            if name in skip:
                continue
            try:
                phase()
            except Exception as exc:  # one broken measurement must not lose the others: reported, exit non-zero
                errors[name] = f"{type(exc).__name__}: {exc}"
                progress(f"phase {name} FAILED: {errors[name]}")
    finally:
        harness.close()
        children.stop_all()
    targets, rows, figures = build_report(harness.data, plan)
    table = render(targets, rows)
    meta = {
        "loadavg_at_start": load_at_start,
        "date": dt.date.today().isoformat(),
        "mode": plan.name,
        "command": "make bench-quick" if args.quick else "make bench",
        "seconds": time.monotonic() - started,
        "git": _git_head(),
        "machine": common.machine(),
        "versions": common.server_versions(),
        "plan": {
            k: (v if not isinstance(v, dict) else {str(a): b for a, b in v.items()}) for k, v in plan.__dict__.items()
        },
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    out = RESULTS / f"{meta['date']}{'-quick' if args.quick else ''}.json"
    meta["errors"] = errors
    document = {"meta": meta, "targets": [t.as_dict() for t in targets], "figures": figures, "table": table}
    out.write_text(json.dumps(_jsonable(document), indent=2, default=str) + "\n")
    print(table)
    progress(f"wrote {out.relative_to(common.ROOT)} in {meta['seconds']:.0f} s")
    if args.write_docs:
        DOCS.write_text(common.replace_marked(DOCS.read_text(), docs_section(table, meta)))
        progress(f"rewrote the bench section of {DOCS.relative_to(common.ROOT)}")
    if errors:
        progress(f"{len(errors)} phase(s) failed: {', '.join(errors)} (see above and bench/.work/logs)")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
