"""The report of bench/run.py: the collected figures, their targets and verdicts, the table and the docs section.

Targets are issue 30's (ratios within one run, never asserted in tests): MCP read tool and linear saga over HTTP
<= 1.5x the bare MCPServer, both eras; the proxy's read tool <= 1.5x direct; CLI verbs <= 0.5 s; the engine's
chained step <= 1.0x DBOS per step and peak steps/s >= 1.0x DBOS. Rows without a target of their own in the issue
carry the nearest one, said so in their note. The surfaces' rows are built by bench/report_surfaces.py.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from bench import cli_wall, common, report_surfaces
from bench.common import Target, fmt, median, paired_ratio, ratio, summarize

COLLAPSE_LIMIT = 0.8  # steps/s at 64 concurrent sagas must keep at least this share of steps/s at 4


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


def _ms(seconds: float) -> float:
    return seconds * 1000


def _latency(data: Collected, system: str, level: int = 1) -> common.Summary:
    return summarize([r.samples for r in data.get(system, level)])


def _paired_latency_ratio(data: Collected, a: str, b: str) -> float:
    return paired_ratio(_latency(data, a).round_medians, _latency(data, b).round_medians)


def build_report(data: Collected, plan: object = None) -> tuple[list[Target], list[list[str]], dict[str, Any]]:
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
        Target("per-step p50 / DBOS per-step p50", _paired_latency_ratio(data, "embedded", "dbos"), "<=", 1.0),
        Target(
            "peak steps/s / DBOS peak steps/s",
            ratio(ours_peak[0], dbos_peak[0]),
            ">=",
            1.0,
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
            1.5,
            "over HTTP, journal on PostgreSQL; allow gate, one call per iteration",
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
    targets += report_surfaces.targets(data.extra)
    cli = data.extra.get("cli", {})
    targets += cli_wall.targets(cli)
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
        **report_surfaces.figures(data.extra),
        "proxy_ms": {"direct": direct.as_dict(1000), "proxied": proxied.as_dict(1000)},
        **{k: v for k, v in data.extra.items() if k not in ("mcp", "proxy", *report_surfaces.KEYS)},
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
