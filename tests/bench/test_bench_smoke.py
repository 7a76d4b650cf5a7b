"""The benchmark harness's pure pieces (statistics, verdicts, the table, the docs section), so bench/ cannot rot.

No timing is asserted here: the suite itself runs with `make bench` / `make bench-quick`.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from bench import cli_wall, common, report_surfaces
from bench.common import Summary, Target
from bench.mcp_surfaces import DAG_NODES, dag_plan
from bench.profile_chain import classify
from bench.proxy_roundtrip import proxy_config
from bench.proxy_surfaces import TOOL, http_config, server_name, stdio_config
from bench.run import QUICK, Collected, RoundFigure, build_report, docs_section, render
from bench.sagas_chain import chain_intervals
from governance.policy.gates import gate_for
from sagas.protocols.proxy.config import load_proxy_config


def test_percentile_interpolates_between_ranks_like_numpy():
    samples = [4.0, 1.0, 3.0, 2.0]
    assert common.percentile(samples, 0) == 1.0
    assert common.percentile(samples, 50) == 2.5
    assert common.percentile(samples, 100) == 4.0
    assert common.percentile(samples, 99) == pytest.approx(3.97)
    assert math.isnan(common.percentile([], 50))
    with pytest.raises(ValueError):
        common.percentile(samples, 101)


def test_summary_takes_the_median_of_round_medians_and_p99_over_all_samples():
    summary = common.summarize([[1.0, 2.0, 3.0], [10.0, 11.0, 12.0], [2.0, 3.0, 4.0]])
    assert summary.round_medians == [2.0, 11.0, 3.0]
    assert summary.p50 == 3.0  # one slow round does not move the median
    assert summary.n == 9
    assert summary.p99 == pytest.approx(common.percentile([1, 2, 3, 10, 11, 12, 2, 3, 4], 99))
    assert summary.as_dict(1000)["p50"] == 3000.0


def test_paired_ratio_is_the_median_of_per_round_ratios():
    assert common.paired_ratio([2.0, 4.0, 100.0], [1.0, 2.0, 10.0]) == 2.0
    assert math.isnan(common.ratio(1.0, 0.0))
    assert math.isnan(common.paired_ratio([], []))


@pytest.mark.parametrize(
    ("value", "op", "limit", "verdict"),
    [(1.2, "<=", 1.3, "PASS"), (1.31, "<=", 1.3, "MISS"), (2.0, ">=", 2.0, "PASS"), (math.nan, ">=", 2.0, "N/A")],
)
def test_target_verdicts(value: float, op: str, limit: float, verdict: str):
    assert Target("t", value, op, limit).verdict == verdict


def test_targets_show_ratios_and_shares():
    assert Target("t", 1.234, "<=", 1.3).shown(1.234) == "1.23x"
    assert Target("t", 0.05, "<=", 0.1, unit="%").shown(0.05) == "5.0%"
    assert common.fmt(12345.6) == "12,346"
    assert common.fmt(math.nan) == "n/a"
    assert common.fmt(0.1234, "ms", 3) == "0.123 ms"


def test_markdown_table_and_marked_section_replacement():
    table = common.markdown_table(["a", "bb"], [["1", "2"], ["333", "4"]])
    lines = table.splitlines()
    assert lines[0] == "| a   | bb |" and lines[1] == "|-----|----|" and len(lines) == 4
    text = "intro\n<!-- bench:begin -->\nold\n<!-- bench:end -->\noutro\n"
    assert common.replace_marked(text, "new") == "intro\n<!-- bench:begin -->\nnew\n<!-- bench:end -->\noutro\n"
    with pytest.raises(ValueError):
        common.replace_marked("no markers", "new")


def test_chain_intervals_are_per_saga_gaps_in_sequence_order():
    rows = [("a", 2, 10.5), ("a", 1, 10.0), ("a", 3, 11.5), ("b", 1, 20.0), ("b", 2, 20.25)]
    assert sorted(chain_intervals(rows)) == [0.25, 0.5, 1.0]


def test_statements_are_labelled_by_verb_and_table():
    assert classify('SELECT "sagas_node"."id" FROM "sagas_node" WHERE 1') == "SELECT sagas_node"
    assert classify('UPDATE "sagas_saga" SET x = 1') == "UPDATE sagas_saga"
    assert classify('INSERT INTO "audit_auditevent" ("id") VALUES (1)') == "INSERT audit_auditevent"
    assert classify('SAVEPOINT "s1"') == "SAVEPOINT/RELEASE"
    assert classify("COMMIT") == "COMMIT"


def test_report_and_table_from_synthetic_rounds():
    data = Collected()
    for _ in range(3):
        data.add("bare", 1, RoundFigure(math.nan, [0.001, 0.001, 0.002]))
        data.add("embedded", 1, RoundFigure(100.0, [0.002, 0.002, 0.003]))
        data.add("dbos", 1, RoundFigure(200.0, [0.004, 0.004]))
        data.add("celery", 1, RoundFigure(150.0, [0.002]))
        data.add("celery-chain", 1, RoundFigure(40.0, [0.01]))
        data.add("embedded", 4, RoundFigure(300.0, []))
        data.add("embedded", 64, RoundFigure(270.0, []))
    data.extra["audit_chain"] = {"events_per_node": 4.0, "chain_seconds_per_event": 0.00002}
    data.extra["mcp"] = {"ours": [[0.03, 0.03]], "bare": [[0.02, 0.02]]}
    data.extra["proxy"] = {"direct": [[0.002, 0.002], [0.003, 0.003]], "proxied": [[0.005, 0.005], [0.005, 0.005]]}
    data.extra["recovery"] = {
        "lease_seconds": 5,
        "sweep_interval_seconds": 1.0,
        "trials": [{"contract": "not idempotent", "seconds": 4.0}, {"contract": "idempotent", "seconds": 7.0}],
    }
    targets, rows, figures = build_report(data, QUICK)
    by_name = {t.name: t for t in targets}
    assert by_name["chained step p50 / bare INSERT+COMMIT p50"].value == 2.0
    assert by_name["chained step p50 / bare INSERT+COMMIT p50"].verdict == "MISS"
    assert by_name["per-step p50 / DBOS per-step p50"].verdict == "PASS"
    assert by_name["peak steps/s / DBOS peak steps/s"].value == 1.5
    assert by_name["Celery-executor sagas steps/s / plain Celery chain tasks/s"].value == 150.0 / 40.0
    assert by_name["hash chain share of a chained step (estimate)"].value == pytest.approx(0.04)
    assert by_name["steps/s @64 / @4 sagas (embedded)"].value == pytest.approx(0.9)
    assert by_name["MCP begin+execute / bare MCPServer 2 calls"].value == pytest.approx(1.5)
    proxied = by_name["no-op tool through the proxy / called directly, p50"]
    assert proxied.value == pytest.approx((2.5 + 5 / 3) / 2) and proxied.verdict == "MISS"
    assert figures["proxy_ms"]["proxied"]["p50"] == pytest.approx(5.0)
    assert by_name["recovery: SIGKILL -> escalated, / lease"].verdict == "PASS"
    assert by_name["recovery: SIGKILL -> re-run via Celery, / lease"].verdict == "MISS"
    assert figures["per_second"]["embedded"]["64"] == 270.0
    table = render(targets, rows)
    assert table.count("\n") == len(targets) + len(rows) + 1
    meta = {
        "date": "2026-01-01",
        "command": "make bench-quick",
        "mode": "quick",
        "seconds": 90.0,
        "git": "abc1234",
        "machine": {"nproc": 2, "cpu": "cpu", "python": "3.11"},
        "versions": {"postgresql": "15", "redis": "7"},
    }
    section = docs_section(table, meta)
    assert section.startswith("Last run: 2026-01-01") and table in section


def test_the_proxy_bench_configuration_loads_and_allows_the_noop(tmp_path: Path):
    path = tmp_path / "bench-proxy.json"
    path.write_text(json.dumps(proxy_config("http://127.0.0.1:9/mcp")))
    config = load_proxy_config(path)
    assert [server.url for server in config.servers] == ["http://127.0.0.1:9/mcp"]
    assert gate_for("unknown", "noop", "bench", "bench", "", config.gates).action == "allow"


def test_summary_dataclass_defaults():
    assert Summary(1.0, 2.0, 3).round_medians == []


def test_the_dag_has_eight_nodes_each_after_planned_ones():
    plan = dag_plan()
    assert len(plan) == DAG_NODES == 8
    seen: set[str] = set()
    for key, after in plan:
        assert set(after) <= seen
        seen.add(key)
    assert plan[-1] == ("z", [f"b{n}" for n in range(1, 7)])


def test_surface_targets_pair_ours_with_the_bare_reference_round_by_round():
    extra = {
        "mcp_http": {
            "read/sqlite/legacy": {"ours": [[0.003, 0.003], [0.004]], "bare": [[0.002], [0.002]]},
            "dag/postgresql/modern": {"ours": [[0.1]], "bare": [[0.05]]},
            "_meta": {"dag_calls": [[11.0]]},
        },
        "a2a": {"sqlite": {"ours": [[0.01]], "bare": [[0.005]]}},
        "proxy_read": {"stdio/sqlite": {"direct": [[0.001]], "proxied": [[0.0012]]}},
    }
    by_name = {t.name: t for t in report_surfaces.targets(extra)}
    read = by_name["MCP read: get_saga / bare read_row (one SELECT), sqlite, legacy 2025-11-25"]
    assert read.value == pytest.approx(1.75) and read.verdict == "MISS" and read.limit == 1.5
    dag = next(t for t in by_name.values() if t.name.startswith("MCP DAG"))
    assert dag.value == pytest.approx(2.0) and "11 calls each" in dag.detail
    assert next(t for t in by_name.values() if t.name.startswith("A2A")).value == pytest.approx(2.0)
    proxied = by_name["proxy over stdio, journal sqlite: read tool proxied / direct, p50"]
    assert proxied.value == pytest.approx(1.2) and proxied.verdict == "PASS"
    assert report_surfaces.figures(extra)["a2a_ms"]["sqlite"]["ours"]["p50"] == pytest.approx(10.0)


def test_the_proxys_added_milliseconds_are_the_median_of_per_round_differences_with_their_tail():
    samples = {
        "direct/sqlite/read": [[0.0002, 0.0002], [0.0003]],
        "proxied/sqlite/read": [[0.0010, 0.0012], [0.0013]],  # rounds add 0.9 and 1.0 ms: the median is 1.0
        "direct/sqlite/write": [[0.0002]],
        "proxied/sqlite/write": [[0.0015, 0.0016, 0.0100]],
    }
    by_name = {t.name: t for t in report_surfaces.added_targets(samples)}
    read = by_name["stdio proxy, journal sqlite: added to a read (class read, gate allow), p50"]
    assert read.value == pytest.approx(1.0) and read.limit == 0.9 and read.verdict == "MISS" and read.unit == "ms"
    write = by_name["stdio proxy, journal sqlite: added to a write journaled ahead, p50"]
    assert write.value == pytest.approx(1.4) and write.verdict == "PASS"
    tail = by_name["stdio proxy, journal sqlite: write p99 / p50 through the proxy"]
    assert tail.value > 2.0 and tail.verdict == "MISS" and tail.shown(tail.value).endswith("x")
    assert read.shown(read.value) == "1.000 ms"
    shown = report_surfaces.figures({"proxy_added": samples})["proxy_added_ms"]
    assert shown["sqlite/read"]["proxied"]["p50"] == pytest.approx(1.2)
    http = report_surfaces.http_added_targets({"http/postgresql": {"direct": [[0.002]], "proxied": [[0.0035]]}})
    expected = "HTTP proxy before an SDK server, journal postgresql: added to a read (class read, gate allow), p50"
    assert [t.name for t in http] == [expected]
    assert http[0].value == pytest.approx(1.5) and http[0].verdict == "MISS"


def test_the_http_proxys_added_milliseconds_are_named_by_transport_and_journal():
    samples = {"direct/http-sqlite/read": [[0.0010]], "proxied/http-sqlite/read": [[0.0018]]}
    names = [t.name for t in report_surfaces.added_targets(samples)]
    assert "HTTP proxy, journal sqlite: added to a read (class read, gate allow), p50" in names
    shown = report_surfaces.figures({"proxy_added": samples})["proxy_added_ms"]
    assert shown["http-sqlite/read"]["proxied"]["p50"] == pytest.approx(1.8)


def test_cli_verbs_are_judged_against_a_fifth_of_a_second_beside_the_bare_start():
    figures = {
        "samples": {
            cli_wall.BARE: [0.02, 0.03],
            "pending": [0.15, 0.19],
            "ledger": [0.25],
            cli_wall.APPROVE_SENT: [1.0],
        }
    }
    by_name = {t.name: t for t in cli_wall.targets(figures)}
    assert by_name["CLI wall time: semantic-saga pending, p50"].verdict == "PASS"
    assert by_name["CLI wall time: semantic-saga ledger, p50"].verdict == "MISS"
    assert len(by_name) == 2 and "bare" in by_name["CLI wall time: semantic-saga ledger, p50"].detail
    assert [row[0] for row in cli_wall.rows(figures)] == [
        f"CLI wall time: {cli_wall.BARE}, p50 (min-max)",
        f"CLI wall time: semantic-saga {cli_wall.APPROVE_SENT}, p50 (min-max)",
    ]


def test_the_proxy_read_configurations_load_and_allow_the_read(tmp_path: Path):
    for config in (stdio_config(), http_config("http://127.0.0.1:9/mcp")):
        path = tmp_path / "bench-proxy-read.json"
        path.write_text(json.dumps(config))
        loaded = load_proxy_config(path)
        assert [server.name for server in loaded.servers] == [server_name()]
        assert gate_for("read", TOOL, server_name(), "bench", "", loaded.gates).action == "allow"
