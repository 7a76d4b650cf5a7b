"""Targets and figures of the surfaces as clients use them (issue 30): MCP over HTTP in both eras, A2A, the proxy.

Each row is a paired ratio (the median of per-round ratios of ours over its bare reference, taken side by side in
the same round) with both p50s in its note. Pure: tests/bench covers it with synthetic samples.
"""

from __future__ import annotations

from typing import Any

from bench.common import Target, fmt, paired_ratio, summarize

KEYS = ("mcp_http", "a2a", "proxy_read")
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
    return out


def figures(extra: dict[str, Any]) -> dict[str, Any]:
    """Per figure and side: p50, p99, n and the round medians, in milliseconds."""
    return {
        f"{key}_ms": {
            name: {side: summarize(samples).as_dict(1000) for side, samples in sides.items()}
            for name, sides in extra.get(key, {}).items()
        }
        for key in KEYS
        if key in extra
    }
