"""The chaos suite (bench/chaos.py) in its short form: real `serve` replicas, prefork Celery workers, a private
Redis, a recording sink, and the proxy in front of a recording downstream MCP server (which floods it with
notifications now and then), with every fault kind injected, and zero invariant violations (docs/reliability.md).

It needs PostgreSQL (processes share one database with row locks): it runs in the PostgreSQL pass and is skipped,
with that reason, in the SQLite pass. The suite makes its own database next to the test database and drops it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.db import connection

from tests.distributed.workers import shared_database_url

ROOT = Path(__file__).resolve().parents[2]
CHAOS = [sys.executable, str(ROOT / "bench" / "chaos.py")]
SHORT = ["--sagas", "100", "--duration", "100", "--workers", "2", "--replicas", "2", "--clients", "10"]
BOUND_SECONDS = 420  # start-up, 100 s of faults, the quiescence bound and the checks, with room on a slow runner


def _chaos_url() -> str:
    """A database of its own beside the test database (same server, same user)."""
    name = f"chaos_ci_{os.environ.get('PYTEST_XDIST_WORKER', 'gw0')}_{os.getpid()}"
    return shared_database_url().rsplit("/", 1)[0] + "/" + name


def _drop(url: str) -> None:
    import psycopg

    admin, name = url.rsplit("/", 1)
    with psycopg.connect(f"{admin}/postgres", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.mark.postgres_only
def test_short_chaos_run_injects_every_fault_kind_and_finds_no_violation(tmp_path: Path):
    if connection.vendor != "postgresql":
        pytest.skip("the chaos suite shares one database across processes: runs in the PostgreSQL pass")
    url, out = _chaos_url(), tmp_path / "chaos.json"
    try:
        run = subprocess.run(
            [*CHAOS, *SHORT, "--seed", "7", "--database-url", url, "--out", str(out)],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=BOUND_SECONDS,
            env={**os.environ, "NO_COLOR": "1"},
        )
    finally:
        _drop(url)
    assert run.returncode == 0, f"{run.stdout}\n{run.stderr[-6000:]}"
    result = json.loads(out.read_text())
    assert result["violation_count"] == 0 and result["violations"] == {}
    assert len(result["faults"]) >= 6, result["faults"]
    shapes = {"linear", "fan_out", "approval", "compensating", "not_idempotent", "proxied"}
    assert result["sagas_run"] >= 60 and set(result["by_shape"]) == shapes
    assert result["downstream_calls"] > 0  # the proxied sessions reached the downstream MCP server through the proxy
    # The one fault that may find nothing to hit: a pool child of a worker that is still starting after a restart.
    not_injected = [e for e in result["fault_errors"] if not e.startswith("worker_child_sigkill: RuntimeError")]
    assert result["fault_cycles"] >= 10 and not_injected == [], f"{not_injected}\n{run.stdout}"
    # a downstream flooded the proxy with notifications during its calls, and every invariant above still held
    assert result["faults"].get("downstream_notification_flood", 0) > 0 and result["notifications_flooded"] > 0
    # a proxy killed while it held a call for a person: the call was withdrawn and never sent (an invariant above)
    assert result["held_calls_killed"] == result["faults"].get("proxy_held_sigkill", 0)
    opened = result["sagas_run"] - result["proxied_sessions_never_opened"]  # no saga: the proxy died first
    assert result["audit_chains_verified"] >= opened and result["quiescence_seconds"] is not None
    assert "invariant violations" in run.stdout and "\033[" not in run.stdout  # one table, no colour off a TTY


def test_a_database_elsewhere_or_not_named_for_chaos_is_refused_before_anything_starts():
    run = subprocess.run(
        [*CHAOS, "--sagas", "1", "--duration", "1", "--database-url", "postgresql://postgres@db.example:5432/prod"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode != 0
    assert "must point at this machine" in run.stderr and "must start with 'chaos'" in run.stderr
