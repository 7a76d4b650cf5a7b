"""The benchmark suite: one command, every comparison side by side, one table, one JSON file.

Usage: .venv/bin/python bench/run.py [--quick] [--write-docs] (or `make bench`, `make bench-quick`).

Creates and migrates its own PostgreSQL databases (saga_bench for us, dbos_bench for DBOS), starts a private
redis-server and the Celery workers it needs on loopback, and stops them all on the way out. Each concurrency
level runs every system in rounds whose order rotates, so slow drift on a shared machine hits all systems alike;
figures are medians of per-round values, p99 over all samples, and ratios are medians of per-round ratios.
Progress goes to stderr; the table to stdout; the figures to bench/results/<date>[-quick].json.
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

from bench import cli_wall, common
from bench.common import Target, fmt, median, paired_ratio, progress, ratio, summarize

RESULTS = common.ROOT / "bench" / "results"
DOCS = common.ROOT / "docs" / "benchmarks.md"
SYSTEMS = ("bare", "embedded", "celery", "dbos", "celery-chain")
COLLAPSE_LIMIT = 0.8  # steps/s at 64 concurrent sagas must keep at least this share of steps/s at 4


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
)


@dataclass
class RoundFigure:
    per_second: float  # steps/s (tasks/s for the plain Celery chain); NaN for bare
    samples: list[float]  # per-step (per-op) seconds


@dataclass
class Collected:
    # system -> level -> rounds
    rounds: dict[str, dict[int, list[RoundFigure]]] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)

    def add(self, system: str, level: int, figure: RoundFigure) -> None:
        self.rounds.setdefault(system, {}).setdefault(level, []).append(figure)

    def get(self, system: str, level: int) -> list[RoundFigure]:
        return self.rounds.get(system, {}).get(level, [])

    def per_second(self, system: str, level: int) -> float:
        return median(r.per_second for r in self.get(system, level))

    def peak(self, system: str) -> tuple[float, int]:
        best = (math.nan, 0)
        for level in self.rounds.get(system, {}):
            value = self.per_second(system, level)
            if not math.isnan(value) and (math.isnan(best[0]) or value > best[0]):
                best = (value, level)
        return best


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


# --- reporting ------------------------------------------------------------------------------------------------------


def _ms(seconds: float) -> float:
    return seconds * 1000


def _latency(data: Collected, system: str, level: int = 1) -> common.Summary:
    return summarize([r.samples for r in data.get(system, level)])


def _paired_latency_ratio(data: Collected, a: str, b: str) -> float:
    return paired_ratio(_latency(data, a).round_medians, _latency(data, b).round_medians)


def build_report(data: Collected, plan: Plan) -> tuple[list[Target], list[list[str]], dict[str, Any]]:
    bare = _latency(data, "bare")
    ours = _latency(data, "embedded")
    celery_lat = _latency(data, "celery")
    dbos = _latency(data, "dbos")
    ours_peak = max(((*data.peak("embedded"), "embedded"), (*data.peak("celery"), "celery")), key=_peak_key)
    dbos_peak = data.peak("dbos")
    celery_peak = data.peak("celery")
    chain_peak = data.peak("celery-chain")
    audit = data.extra.get("audit_chain", {})
    chain_per_step = audit.get("events_per_node", math.nan) * audit.get("chain_seconds_per_event", math.nan)
    mcp = data.extra.get("mcp", {"ours": [], "bare": []})
    mcp_ours = summarize(mcp["ours"])
    mcp_bare = summarize(mcp["bare"])
    proxied_calls = data.extra.get("proxy", {"direct": [], "proxied": []})
    direct = summarize(proxied_calls["direct"])
    proxied = summarize(proxied_calls["proxied"])
    recovery = data.extra.get("recovery", {"trials": [], "lease_seconds": math.nan, "sweep_interval_seconds": 0})
    lease = float(recovery["lease_seconds"])
    sweep = float(recovery["sweep_interval_seconds"])
    resumes = {
        kind: median(t["seconds"] for t in recovery["trials"] if t["contract"] == kind)
        for kind in ("not idempotent", "idempotent")
    }

    targets = [
        Target("chained step p50 / bare INSERT+COMMIT p50", _paired_latency_ratio(data, "embedded", "bare"), "<=", 1.3),
        Target("chained step p99 / bare INSERT+COMMIT p99", ratio(ours.p99, bare.p99), "<=", 2.0),
        Target("per-step p50 / DBOS per-step p50", _paired_latency_ratio(data, "embedded", "dbos"), "<=", 0.5),
        Target(
            "peak steps/s / DBOS peak steps/s",
            ratio(ours_peak[0], dbos_peak[0]),
            ">=",
            2.0,
            f"ours {ours_peak[2]}@{ours_peak[1]}, DBOS @{dbos_peak[1]}",
        ),
        Target(
            "Celery-executor sagas steps/s / plain Celery chain tasks/s",
            ratio(celery_peak[0], chain_peak[0]),
            ">=",
            3.0,
            f"peaks: ours @{celery_peak[1]}, chain @{chain_peak[1]}",
        ),
        Target(
            "hash chain share of a chained step (estimate)",
            ratio(chain_per_step, ours.p50),
            "<=",
            0.10,
            "computation only, no on/off switch",
            unit="%",
        ),
    ]
    for system in ("embedded", "celery"):
        if data.get(system, 64) and data.get(system, 4):
            targets.append(
                Target(
                    f"steps/s @64 / @4 sagas ({system})",
                    ratio(data.per_second(system, 64), data.per_second(system, 4)),
                    ">=",
                    COLLAPSE_LIMIT,
                    "no collapse",
                )
            )
    targets += [
        Target(
            "MCP begin+execute / bare MCPServer 2 calls",
            paired_ratio(mcp_ours.round_medians, mcp_bare.round_medians),
            "<=",
            1.5,
        ),
        Target(
            "no-op tool through the proxy / called directly, p50",
            paired_ratio(proxied.round_medians, direct.round_medians),
            "<=",
            2.0,
            "allow gate, one call per iteration",
        ),
    ]
    sessions = data.extra.get("new_sessions", {})
    targets += [
        Target(
            "new PostgreSQL sessions per 100 steps, warm (embedded)",
            sessions.get("embedded_per_100_steps", math.nan),
            "<=",
            0.0,
            "pg_stat_database.sessions over 100 chained steps",
            unit="count",
        ),
        Target(
            "new PostgreSQL sessions per 100 MCP calls, warm",
            sessions.get("mcp_per_100_calls", math.nan),
            "<=",
            0.0,
            "served begin_saga/execute_saga_step, rounds 2 on",
            unit="count",
        ),
    ]
    cli = data.extra.get("cli", {})
    slowest, verb = cli_wall.slowest_verb_p50(cli)
    targets.append(
        Target(
            "slowest operator verb, CLI wall time p50",
            slowest,
            "<=",
            0.5,
            f"{verb}; bare `python -c pass` {fmt(median(cli.get('samples', {}).get(cli_wall.BARE, [])), 's')}",
            unit="s",
        )
    )
    for kind, outcome in (("not idempotent", "escalated"), ("idempotent", "re-run via Celery")):
        if not math.isnan(resumes[kind]):
            targets.append(
                Target(
                    f"recovery: SIGKILL -> {outcome}, / lease",
                    ratio(resumes[kind], lease),
                    "<=",
                    ratio(lease + sweep, lease),
                    f"{fmt(resumes[kind])} s; lease {lease:g} s + sweep {sweep:g} s",
                )
            )

    def per_level(system: str) -> str:
        return ", ".join(f"{fmt(data.per_second(system, lvl))}@{lvl}" for lvl in sorted(data.rounds.get(system, {})))

    stmts = data.extra.get("statements", {})
    pair = data.extra.get("immediate_pair", {})
    fan = data.extra.get("fanout", {})
    verify = data.extra.get("verify", {})
    rows = [
        ["bare INSERT+COMMIT (psycopg) p50 / p99", f"{fmt(_ms(bare.p50))} / {fmt(_ms(bare.p99))} ms", "", "", ""],
        [
            "chained step, embedded, 1 saga: p50 / p99",
            f"{fmt(_ms(ours.p50))} / {fmt(_ms(ours.p99))} ms",
            "",
            "",
            "",
        ],
        [
            "chained step, Celery -c 2, 1 saga: p50 / p99",
            f"{fmt(_ms(celery_lat.p50))} / {fmt(_ms(celery_lat.p99))} ms",
            "",
            "",
            "",
        ],
        ["DBOS step, 1 workflow: p50 / p99", f"{fmt(_ms(dbos.p50))} / {fmt(_ms(dbos.p99))} ms", "", "", ""],
        ["steps/s ours embedded @ concurrent sagas", per_level("embedded"), "", "", ""],
        ["steps/s ours Celery (-c 2) @ concurrent sagas", per_level("celery"), "", "", ""],
        ["steps/s DBOS @ concurrent workflows", per_level("dbos"), "", "", ""],
        ["tasks/s plain Celery chain (-c 2) @ concurrent chains", per_level("celery-chain"), "", "", ""],
        [
            "fan-out 1->16->1 wall time (embedded / Celery)",
            " / ".join(f"{fmt(_ms(median(r['seconds'] for r in fan.get(s, []))))} ms" for s in ("embedded", "celery")),
            "",
            "",
            "",
        ],
        [
            "MCP begin_saga+execute_saga_step vs bare 2 calls, p50",
            f"{fmt(_ms(mcp_ours.p50))} vs {fmt(_ms(mcp_bare.p50))} ms",
            "",
            "",
            f"the same two calls in process: {fmt(_ms(pair.get('seconds_p50', math.nan)))} ms, "
            f"{fmt(pair.get('statements'))} statements",
        ],
        [
            "no-op MCP tool, direct vs through the proxy: p50 / p99",
            f"{fmt(_ms(direct.p50))} / {fmt(_ms(direct.p99))} vs {fmt(_ms(proxied.p50))} / {fmt(_ms(proxied.p99))} ms",
            "",
            "",
            "",
        ],
        [
            "hash chain per event / events per chained node",
            f"{fmt(audit.get('chain_seconds_per_event', math.nan) * 1e6)} us / {fmt(audit.get('events_per_node'))}",
            "",
            "",
            "",
        ],
        [
            f"verify_audit over {fmt(float(verify.get('events', math.nan)))} events",
            f"{fmt(verify.get('events_per_second'))} events/s",
            "",
            "",
            "",
        ],
        [
            "SQL statements per chained node / SELECT 1 round trip",
            f"{fmt(stmts.get('statements_per_node'))} / "
            f"{fmt(data.extra.get('select_1_round_trip', {}).get('p50', math.nan) * 1000, 'ms', 3)}",
            "",
            "",
            "",
        ],
        *cli_wall.rows(cli),
    ]
    figures = {
        "bare_insert_commit_ms": bare.as_dict(1000),
        "chained_step_ms": {s: _latency(data, s).as_dict(1000) for s in ("embedded", "celery", "dbos")},
        "per_second": {
            s: {str(lvl): data.per_second(s, lvl) for lvl in sorted(data.rounds.get(s, {}))}
            for s in ("embedded", "celery", "dbos", "celery-chain")
        },
        "per_second_rounds": {
            s: {str(lvl): [r.per_second for r in rounds] for lvl, rounds in sorted(levels.items())}
            for s, levels in data.rounds.items()
            if s != "bare"
        },
        "mcp_ms": {"ours": mcp_ours.as_dict(1000), "bare": mcp_bare.as_dict(1000)},
        "proxy_ms": {"direct": direct.as_dict(1000), "proxied": proxied.as_dict(1000)},
        **{k: v for k, v in data.extra.items() if k not in ("mcp", "proxy")},
    }
    return targets, rows, figures


def _peak_key(peak: tuple[float, int, str]) -> float:
    return -math.inf if math.isnan(peak[0]) else peak[0]


def render(targets: list[Target], rows: list[list[str]]) -> str:
    header = ["figure", "value", "target", "verdict", "note"]
    body = common.target_rows(targets) + rows
    return common.markdown_table(header, body)


def docs_section(table: str, meta: dict[str, Any]) -> str:
    m = meta["machine"]
    v = meta["versions"]
    load = meta.get("loadavg_at_start")
    busy = f", load average {load[0]:.1f} at the start" if load else ""
    return (
        f"Last run: {meta['date']}, `{meta['command']}` ({meta['mode']} mode, {meta['seconds']:.0f} s), "
        f"git {meta['git']}; {m['nproc']} cores ({m['cpu']}){busy}, PostgreSQL {v.get('postgresql')}, "
        f"Redis {v.get('redis')}, Python {m['python']}.\n\n{table}\n"
    )


def _git_head() -> str:
    import subprocess

    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=common.ROOT, capture_output=True, text=True, timeout=10
        )
        return out.stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


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
    parser.add_argument(
        "--skip", default="", help="comma-separated phases to skip (levels,fanout,mcp,proxy,cli,audit,recovery)"
    )
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
        ("proxy", harness.proxy),
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
