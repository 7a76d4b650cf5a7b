"""Chaos suite: sagas of several shapes through real `serve` replicas and Celery workers while faults are injected,
then global invariants checked from the database and the sink's record (docs/reliability.md).

    .venv/bin/python bench/chaos.py --sagas 200 --duration 120 --database-url postgresql://postgres@127.0.0.1:5432/chaos

Everything runs on loopback and is bounded: sagas are started until --sagas or --duration, faults stop at
--duration, and the run then waits at most the quiescence bound before it checks. Exit status 1 on any violation,
2 on a configuration error. Progress goes to stderr; the table to stdout; JSON to --out.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import logging
import os
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import chaos_check, chaos_setup
from bench.chaos_downstream import HELD, HELD_TIMEOUT_MS, PACK
from bench.chaos_drive import TOKENS, Api, Driver, Load, ShapeDriver, planned_shapes
from bench.chaos_faults import KINDS, NEEDS_A_PROXY, PROXY_KINDS, Injector
from bench.chaos_fleet import Fleet, Supervisor
from bench.chaos_proxied import NO_SESSION, close_abandoned_holds, close_held_sessions, drive_proxied
from bench.chaos_sink import Sink
from bench.common import ROOT, machine

LEASE_SECONDS = 3
SWEEP_SECONDS = 1.0
NUDGE_RESEND_SECONDS = 10.0  # sagas.coordinator.recovery: a nudge lost with Redis's queue is re-sent after this
DRAIN_SECONDS = 45.0  # work that was legitimately still queued when the faults stopped
WATCH_SECONDS = 5.0
# An attempt whose lease ran out is made visible (retried, failed as uncertain, fenced) by the next sweep: one
# interval, plus what a pass takes on a loaded 2-core machine.
OVERDUE_GRACE_SECONDS = SWEEP_SECONDS + 4.0
DOWNSTREAM_RECORD = "downstream-calls.jsonl"  # every call the downstream MCP server received (bench/chaos_downstream)


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], prog="bench/chaos.py")
    parser.add_argument("--sagas", type=int, default=5000, help="at most this many sagas (default 5000)")
    parser.add_argument("--duration", type=float, default=2200, help="at most this many seconds (default 2200)")
    parser.add_argument("--seed", type=int, default=20, help="seed of the fault schedule (default 20)")
    parser.add_argument("--database-url", default=os.environ.get("CHAOS_DATABASE_URL", ""), help="a chaos* database")
    parser.add_argument("--workers", type=int, default=3, help="prefork Celery workers (default 3, 2 children each)")
    parser.add_argument("--replicas", type=int, default=2, help="`semantic-saga serve` replicas (default 2)")
    parser.add_argument("--proxies", type=int, default=1, help="proxy replicas (default 1; 0: no proxied sagas)")
    parser.add_argument("--clients", type=int, default=16, help="sagas driven at once (default 16)")
    parser.add_argument("--fault-interval", type=float, default=0.5, help="mean pause between faults (default 0.5 s)")
    parser.add_argument("--kinds", default="", help="fault kinds to inject (comma-separated; default: all)")
    parser.add_argument("--out", default="", help="JSON output (default bench/results/chaos-<date>.json)")
    args = parser.parse_args(argv)
    if not args.database_url:
        parser.error(
            "--database-url is required (or CHAOS_DATABASE_URL), e.g. postgresql://postgres@127.0.0.1:5432/chaos"
        )
    if not args.kinds:
        args.kinds = ",".join(k for k in KINDS if args.proxies or k not in NEEDS_A_PROXY)
    unknown = set(args.kinds.split(",")) - set(KINDS)
    if unknown:
        parser.error(f"unknown fault kinds {sorted(unknown)}; choose from {', '.join(KINDS)}")
    if not args.proxies and set(args.kinds.split(",")) & set(NEEDS_A_PROXY):
        parser.error(f"{', '.join(NEEDS_A_PROXY)} needs a proxy: give --proxies 1 or leave it out of --kinds")
    if args.proxies < 0:
        parser.error("--proxies must be 0 or more")
    return args


def progress(started: float, message: str) -> None:
    print(f"[chaos {time.monotonic() - started:7.1f}s] {message}", file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    name = chaos_setup.check_config(args.database_url, args.sagas, args.duration, args.workers, args.replicas)
    started = time.monotonic()
    work = Path(tempfile.mkdtemp(prefix="chaos-"))
    progress(started, f"database {name} (recreated), logs in {work}")
    chaos_setup.recreate_database(args.database_url, name)
    fleet = Fleet(work, chaos_setup.product_env(args.database_url, str(work)), LEASE_SECONDS)
    sink = Sink().start()
    try:
        broker = fleet.start_redis()
        chaos_setup.setup_django(args.database_url, broker, str(work), LEASE_SECONDS)
        chaos_setup.register_actions(sink.url)
        result = run(args, fleet, sink, broker, work, started)
    finally:
        fleet.stop_all()
        sink.stop()
    result["config"] = {k: v for k, v in vars(args).items() if k != "database_url"} | {"database": name}
    out = Path(args.out) if args.out else ROOT / "bench" / "results" / f"chaos-{dt.date.today().isoformat()}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2, default=str) + "\n")
    print(table(result))
    progress(started, f"wrote {out}")
    return 1 if result["violations"] else 0


def run(args: argparse.Namespace, fleet: Fleet, sink: Sink, broker: str, work: Path, t0: float) -> dict[str, Any]:
    from sagas.sweeper import EmbeddedSweeper

    load = Load()
    api = Api(fleet, load)
    shapes = start_fleet(args, fleet, broker, work, api)
    progress(t0, f"{args.workers} workers, {args.replicas} replicas, {args.proxies} proxies, redis {broker}")
    sweeper = EmbeddedSweeper(interval=SWEEP_SECONDS).start()  # the pass Celery beat runs, on the same schedule
    supervisor = Supervisor(fleet).start()
    try:
        result = _run(args, fleet, sink, work, t0, (load, api, shapes))
        return result | {"longest_sweep_pass_seconds": round(sweeper.longest_pass_seconds, 2)}
    finally:
        supervisor.stop()
        sweeper.stop()


def _run(
    args: argparse.Namespace, fleet: Fleet, sink: Sink, work: Path, t0: float, driven: tuple[Load, Api, Any]
) -> dict[str, Any]:
    load, api, shapes = driven
    stop_at = time.monotonic() + args.duration
    bound = LEASE_SECONDS + SWEEP_SECONDS + NUDGE_RESEND_SECONDS + DRAIN_SECONDS
    driver = Driver(api, shapes, args.sagas, args.clients, stop_at, stop_at + bound).start()
    injector = Injector(
        fleet, sink, args.database_url, args.seed, args.fault_interval, LEASE_SECONDS, args.kinds.split(",")
    ).start()
    continuous = watch(injector, load, stop_at, t0, args.sagas)
    injector.stop()
    faults_end = time.monotonic()
    progress(t0, f"faults stopped ({sum(injector.faults.counts.values())} injected); waiting for quiescence")
    quiet_at = quiescence(driver, faults_end + bound)
    # From the moment the last fault was injected (a frozen worker's includes its freeze and its quiet period).
    last = injector.faults.timeline[-1][0] if injector.faults.timeline else time.time()
    quiet = None if quiet_at is None else max(0.0, quiet_at - last)
    close_held_sessions(api, injector.faults.held_kills, time.monotonic() + bound)
    close_abandoned_holds(api, injector.faults.abandoned_holds, time.monotonic() + bound)
    calls = _downstream_calls(work / DOWNSTREAM_RECORD)
    exits = {
        "restarted_by_supervisor": dict(sorted(fleet.exited.items())),
        "celery_unrecoverable_errors": _lines_with(work, "worker-", "Unrecoverable error"),
    }
    return report(load, injector, sink, calls, continuous, quiet, bound) | {"exits_on_their_own": exits}


def _lines_with(work: Path, prefix: str, needle: str) -> int:
    """Lines of the members' logs (`<name>.log`) naming `needle`, over the members whose name starts `prefix`."""
    return sum(log.read_text(errors="replace").count(needle) for log in work.glob(f"{prefix}*.log") if log.is_file())


def _downstream_calls(record: Path) -> list[dict[str, Any]]:
    if not record.exists():
        return []
    return [json.loads(line) for line in record.read_text().splitlines() if line.strip()]


def start_fleet(args: argparse.Namespace, fleet: Fleet, broker: str, work: Path, api: Api) -> dict[str, ShapeDriver]:
    """Workers, REST replicas and (with --proxies) the downstream MCP server and the proxy replicas in front of it,
    each waited for; returns how each saga shape is driven."""
    tokens = work / "tokens.json"
    tokens.write_text(json.dumps({"tokens": TOKENS}))
    for i in range(args.workers):
        fleet.add_worker(i, broker, concurrency=2)
    for i in range(args.replicas):
        fleet.add_server(i, broker, tokens)
    shapes = planned_shapes(api)
    if args.proxies:
        downstream = fleet.start_downstream(work / DOWNSTREAM_RECORD)
        (work / "chaos_pack.json").write_text(json.dumps(PACK))
        config = work / "proxy.json"
        policy = {**HELD, "confirmTimeoutMs": HELD_TIMEOUT_MS}
        # The chaos world is the benchmark's own server: trusted on first use (an HTTP proxy reviews first by default).
        world = {"url": downstream, "trust": "first-use"}
        proxy = {"servers": {"world": world}, "packs": ["chaos_pack.json"], "policy": policy}
        config.write_text(json.dumps(proxy))
        for i in range(args.proxies):
            fleet.add_server(i, broker, tokens, proxy_config=config)
        shapes["proxied"] = lambda round_, deadline: drive_proxied(api, fleet, round_, deadline)
    for member in fleet.workers:
        fleet.wait_worker(member)
    for member in [*fleet.servers, *fleet.proxies]:
        fleet.wait_server(member)
    return shapes


@dataclass
class Continuous:
    """What the harness checks while faults are injected: no step COMPLETED twice, and every expired lease made
    visible by the sweep within OVERDUE_GRACE_SECONDS (the longest wait seen is reported)."""

    twice: list[str] = field(default_factory=list)
    overdue: list[str] = field(default_factory=list)
    longest_overdue: float = 0.0

    def check(self) -> None:
        self.twice.extend(v for v in chaos_check.duplicates_now() if v not in self.twice)
        longest, late = chaos_check.overdue_leases(OVERDUE_GRACE_SECONDS)
        self.longest_overdue = max(self.longest_overdue, longest)
        seen = {line.split(" still ")[0] for line in self.overdue}
        self.overdue.extend(v for v in late if v.split(" still ")[0] not in seen)


def watch(injector: Injector, load: Load, stop_at: float, t0: float, total: int) -> Continuous:
    """Progress every few seconds, with the cheap invariants checked as we go."""
    from django.db import connections

    continuous = Continuous()
    while time.monotonic() < stop_at and not (len(load.runs) >= total):
        time.sleep(WATCH_SECONDS)
        try:
            continuous.check()
        except Exception as exc:  # the database is being faulted too; the final check is authoritative
            progress(t0, f"continuous check skipped: {type(exc).__name__}")
        finally:
            connections.close_all()
        counts = injector.faults.counts
        found = len(continuous.twice) + len(continuous.overdue)
        progress(t0, f"sagas done {len(load.runs)}/{total}, faults {sum(counts.values())}, violations {found}")
    return continuous


def quiescence(driver: Driver, deadline: float) -> float | None:
    """When (wall clock) every driven saga was terminal and nothing was in flight; None: not before the deadline."""
    from sagas.models import Node, Saga, Step

    begun = time.monotonic()
    finished = driver.join(timeout=max(0.0, deadline - begun))
    while finished and time.monotonic() < deadline:
        busy = Node.objects.filter(status__in=["READY", "EXECUTING"]).exists()
        busy = busy or Step.objects.filter(status="EXECUTING").exists()
        busy = busy or Saga.objects.filter(status__in=["FAILED", "ROLLING_BACK"]).exists()
        if not busy:
            return time.time()
        time.sleep(0.2)
    return None


def report(
    load: Load,
    injector: Injector,
    sink: Sink,
    calls: list[dict[str, Any]],
    continuous: Continuous,
    quiet: float | None,
    bound: float,
) -> dict[str, Any]:
    from sagas.models import Saga

    deliveries = sink.snapshot()
    fenced, audited, unconfirmed = chaos_check.fenced_writes(injector.faults.pauses)
    chains, chain_violations = chaos_check.audit_chains()
    proxy_kills = sum(injector.faults.counts.get(kind, 0) for kind in PROXY_KINDS)
    lost_reads: list[str] = []
    downstream = chaos_check.effects(chaos_check.downstream_arrivals(calls), True, lost_reads if proxy_kills else None)
    violations: dict[str, list[str]] = {
        "step completed twice (continuous)": continuous.twice,
        f"expired lease not made visible within {OVERDUE_GRACE_SECONDS:.0f}s (continuous)": continuous.overdue,
        "step completed twice": chaos_check.duplicates_now(),
        "not terminal / stuck": chaos_check.settled(),
        "sink effects": chaos_check.effects(chaos_check.sink_arrivals(deliveries), proxied=False),
        "downstream MCP calls": downstream,
        "held call whose proxy was killed not withdrawn": chaos_check.held_calls(injector.faults.held_kills, calls),
        "late write of a fenced-off attempt applied": chaos_check.late_writes(),
        "audit chain": chain_violations,
        "quiescence": [] if quiet is not None else [f"not quiescent within {bound:.0f}s of the last fault"],
        "client gave up": [f"{r.shape} saga {r.saga_id or '?'}: {r.error}" for r in load.runs if r.error],
    }
    statuses: dict[str, int] = {}
    for saga in chaos_check.worked_on().only("status"):
        status = saga.status
        statuses[status] = statuses.get(status, 0) + 1
    return {
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "machine": machine(),
        "sagas_run": len(load.runs),
        "by_shape": {s: sum(1 for r in load.runs if r.shape == s) for s in sorted({r.shape for r in load.runs})},
        "proxied_sessions_never_opened": sum(1 for r in load.runs if r.status == NO_SESSION),
        "final_status": statuses,
        "empty_sagas": Saga.objects.filter(nodes__isnull=True, steps__isnull=True).count(),
        "approvals": sum(r.approvals for r in load.runs),
        "requests_retried": load.retried_requests,
        "faults": dict(sorted(injector.faults.counts.items())),
        "fault_cycles": sum(injector.faults.counts.values()),
        "held_calls_killed": len(injector.faults.held_kills),
        "held_call_faults_abandoned": len(injector.faults.abandoned_holds),
        "longest_hold_wait_seconds": round(injector.faults.longest_hold_wait, 2),
        "notifications_flooded": injector.faults.notifications_flooded,
        "fault_errors": injector.faults.errors[:50],
        "sink_deliveries": len(deliveries),
        "downstream_calls": len(calls),
        "reads_unjournaled_after_proxy_kill": len(lost_reads),
        "conflicting_bodies": {
            k: [b.decode(errors="replace") for b in v] for k, v in sink.bodies.items() if len(v) > 1
        },
        "fenced_attempts": fenced,
        "fenced_refusals_audited": audited,
        "fenced_unconfirmed": unconfirmed,
        "fault_timeline": injector.faults.timeline,
        "audit_chains_verified": chains,
        "longest_expired_lease_wait_seconds": round(continuous.longest_overdue, 2),
        "quiescence_seconds": quiet,
        "quiescence_bound_seconds": bound,
        "violation_count": sum(len(v) for v in violations.values()),
        "violations": {k: v for k, v in violations.items() if v},
    }


def _exits(exits: dict[str, Any]) -> str:
    restarted = exits["restarted_by_supervisor"]
    by_member = ", ".join(f"{name} {n}" for name, n in restarted.items())
    celery = exits["celery_unrecoverable_errors"]
    return (
        f"{sum(restarted.values())}"
        + (f" ({by_member})" if by_member else "")
        + (f"; Celery 'Unrecoverable error' {celery}" if celery else "")
    )


def table(result: dict[str, Any]) -> str:
    colour = sys.stdout.isatty() and not os.environ.get("NO_COLOR")
    count = result["violation_count"]
    verdict = "PASS" if count == 0 else "FAIL"
    if colour:
        verdict = f"\033[{'32' if count == 0 else '31'}m{verdict}\033[0m"
    quiet = result["quiescence_seconds"]
    rows = [
        ("sagas run", f"{result['sagas_run']} ({', '.join(f'{k} {v}' for k, v in result['by_shape'].items())})"),
        ("final states", ", ".join(f"{k} {v}" for k, v in sorted(result["final_status"].items()))),
        ("fault cycles", str(result["fault_cycles"])),
        ("held calls whose proxy was killed (all withdrawn, none sent)", str(result["held_calls_killed"])),
        ("  longest wait for an agent's call to be held", f"{result['longest_hold_wait_seconds']} s"),
        *((f"  {kind}", str(n)) for kind, n in result["faults"].items()),
        ("exited on their own, restarted", _exits(result["exits_on_their_own"])),
        ("sink requests / downstream MCP calls", f"{result['sink_deliveries']} / {result['downstream_calls']}"),
        ("  reads answered, journal line lost with a killed proxy", str(result["reads_unjournaled_after_proxy_kill"])),
        ("  notifications the downstream flooded the proxy with", str(result["notifications_flooded"])),
        ("frozen workers' attempts fenced off", str(result["fenced_attempts"])),
        ("  late write refused + audited", str(result["fenced_refusals_audited"])),
        ("  never written (worker lost first)", str(len(result["fenced_unconfirmed"]))),
        ("audit chains verified", str(result["audit_chains_verified"])),
        ("longest wait of an expired lease for the sweep", f"{result['longest_expired_lease_wait_seconds']:.1f} s"),
        ("longest recovery sweep pass", f"{result['longest_sweep_pass_seconds']:.1f} s"),
        ("time to quiescence after last fault", "never" if quiet is None else f"{quiet:.1f} s"),
        ("invariant violations", f"{count} {verdict}"),
    ]
    width = max(len(r[0]) for r in rows)
    lines = [f"{label.ljust(width)}  {value}" for label, value in rows]
    for kind, items in result["violations"].items():
        lines.extend(f"  ! {kind}: {item}" for item in items[:10])
    return "\n".join(lines)


if __name__ == "__main__":
    threading.current_thread().name = "chaos"
    # A proxied client whose proxy was killed cannot end its session politely; the SDK logs each (with a traceback).
    logging.getLogger("mcp.client.streamable_http").setLevel(logging.CRITICAL)
    sys.exit(main())
