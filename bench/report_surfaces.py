"""Targets and figures of the surfaces as clients use them (issue 30): MCP over HTTP in both eras, A2A, the proxy.

Each row is a paired ratio (the median of per-round ratios of ours over its bare reference, taken side by side in
the same round) with both p50s in its note. Pure: tests/bench covers it with synthetic samples.
"""

from __future__ import annotations

from typing import Any

from bench.common import Target, fmt, paired_ratio, summarize

KEYS = ("mcp_http", "a2a", "proxy_read", "proxy_added")
# Issue 41: what the proxy (stdio or HTTP) may add to a call of a raw downstream at p50 (ms), and its p99 over its
# p50.
ADDED_LIMIT_MS = {"read": 0.9, "write": 1.5}
TAIL_LIMIT = 2.0
LIMIT = 1.5
WHAT = {
    "read": ("MCP read: get_saga / bare read_row (one SELECT)", "issue 30"),
    "linear": ("MCP linear saga: begin, 5 x execute(create_text_file), commit / bare 7 writes", "issue 30"),
    "dag": (
        "MCP DAG of 8: begin, 8 x plan, run_ready_steps(4), commit / bare as many writes",
        "no target of its own in issue 30: the linear saga's",
    ),
}
ERA_NAMES = {"legacy": "legacy 2025-11-25", "modern": "modern 2026-07-28"}


def paired(sides: dict[str, list[list[float]]], ours: str, reference: str) -> tuple[float, str]:
    """The paired ratio of `ours` over `reference` and a note with both p50s and p99s in milliseconds."""
    a, b = summarize(sides.get(ours, [])), summarize(sides.get(reference, []))
    note = (
        f"{ours} {fmt(a.p50 * 1000, 'ms')} vs {reference} {fmt(b.p50 * 1000, 'ms')} p50 "
        f"(p99 {fmt(a.p99 * 1000)} vs {fmt(b.p99 * 1000)})"
    )
    return paired_ratio(a.round_medians, b.round_medians), note


def targets(extra: dict[str, Any]) -> list[Target]:
    out: list[Target] = []
    for name, sides in extra.get("mcp_http", {}).items():
        if name.startswith("_"):
            continue
        workload, database, era = name.split("/")
        label, source = WHAT[workload]
        value, note = paired(sides, "ours", "bare")
        if workload == "dag":
            calls = extra["mcp_http"].get("_meta", {}).get("dag_calls", [[float("nan")]])[0][0]
            note += f"; {calls:.0f} calls each"
        out.append(Target(f"{label}, {database}, {ERA_NAMES[era]}", value, "<=", LIMIT, f"{note}; {source}"))
    for database, sides in extra.get("a2a", {}).items():
        value, note = paired(sides, "ours", "bare")
        out.append(
            Target(
                f"A2A SendMessage (begin) / bare a2a-sdk executor, one write, {database}",
                value,
                "<=",
                LIMIT,
                f"{note}; no target of its own in issue 30: the MCP one",
            )
        )
    for name, sides in extra.get("proxy_read", {}).items():
        transport, database = name.split("/")
        value, note = paired(sides, "proxied", "direct")
        source = "issue 30" if transport == "stdio" else "issue 30's stdio target"
        out.append(
            Target(
                f"proxy over {transport}, journal {database}: read tool proxied / direct, p50",
                value,
                "<=",
                LIMIT,
                f"{note}; get_status, allow gate; {source}",
            )
        )
    out += added_targets(extra.get("proxy_added", {}))
    out += http_added_targets(extra.get("proxy_read", {}))
    return out


def http_added_targets(samples: dict[str, dict[str, list[list[float]]]]) -> list[Target]:
    """The milliseconds the HTTP proxy (/proxy/mcp) adds to a read over a direct HTTP call of the same downstream
    (bench/proxy_surfaces.py: an SDK downstream), judged against issue 41's read figure."""
    out: list[Target] = []
    for name, sides in samples.items():
        transport, database = name.split("/")
        if transport != "http":
            continue
        direct, proxied = summarize(sides.get("direct", [])), summarize(sides.get("proxied", []))
        pairs = list(zip(proxied.round_medians, direct.round_medians, strict=False))
        added = sorted(p - d for p, d in pairs)[len(pairs) // 2] * 1000 if pairs else float("nan")
        note = f"proxied {fmt(proxied.p50 * 1000, 'ms')} vs direct {fmt(direct.p50 * 1000, 'ms')} p50; issue 41"
        label = f"HTTP proxy before an SDK server, journal {database}: added to a read (class read, gate allow), p50"
        out.append(Target(label, added, "<=", ADDED_LIMIT_MS["read"], note, unit="ms"))
    return out


def added_targets(samples: dict[str, list[list[float]]]) -> list[Target]:
    """Per transport, journal and call: the milliseconds the proxy adds at p50 (the median of per-round differences,
    each round's two sides taken side by side) and its p99 over its p50."""
    out: list[Target] = []
    databases = sorted({key.split("/")[1] for key in samples})
    for database in databases:
        for kind, limit in ADDED_LIMIT_MS.items():
            direct = summarize(samples.get(f"direct/{database}/{kind}", []))
            proxied = summarize(samples.get(f"proxied/{database}/{kind}", []))
            pairs = list(zip(proxied.round_medians, direct.round_medians, strict=False))
            added = sorted(p - d for p, d in pairs)[len(pairs) // 2] * 1000 if pairs else float("nan")
            call = "a read (class read, gate allow)" if kind == "read" else "a write journaled ahead"
            note = f"proxied {fmt(proxied.p50 * 1000, 'ms')} vs direct {fmt(direct.p50 * 1000, 'ms')} p50; issue 41"
            transport, _, journal = database.rpartition("-")  # "sqlite" (stdio) or "http-sqlite"
            where = f"{'HTTP' if transport == 'http' else 'stdio'} proxy, journal {journal}"
            out.append(Target(f"{where}: added to {call}, p50", added, "<=", limit, note, unit="ms"))
            tail = proxied.p99 / proxied.p50 if proxied.p50 else float("nan")
            note = f"p99 {fmt(proxied.p99 * 1000, 'ms')}, calls back to back; issue 41"
            out.append(Target(f"{where}: {kind} p99 / p50 through the proxy", tail, "<=", TAIL_LIMIT, note))
    return out


def figures(extra: dict[str, Any]) -> dict[str, Any]:
    """Per figure and side: p50, p99, n and the round medians, in milliseconds."""
    return {
        f"{key}_ms": {
            name: {side: summarize(samples).as_dict(1000) for side, samples in sides.items()}
            for name, sides in _by_name(key, extra[key]).items()
        }
        for key in KEYS
        if key in extra
    }


def _by_name(key: str, figures: dict[str, Any]) -> dict[str, dict[str, list[list[float]]]]:
    """proxy_added's samples are keyed "<side>/<database>/<call>" (bench/proxy_latency.py): by "<database>/<call>"
    then side, as the others are."""
    if key != "proxy_added":
        return figures
    out: dict[str, dict[str, list[list[float]]]] = {}
    for name, samples in figures.items():
        side, _, rest = name.partition("/")
        out.setdefault(rest, {})[side] = samples
    return out
