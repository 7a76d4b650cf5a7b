"""Shared helpers for the benchmark suite: statistics, the results table, child processes, databases, Redis.

Everything here that is pure (statistics, ratios, verdicts, the table) is covered by tests/bench so the harness
cannot rot; everything that touches processes is bounded: each wait is a poll with a deadline, each child runs in
its own process group and is killed with that group.
"""

from __future__ import annotations

import contextlib
import math
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
PG_HOST = os.environ.get("BENCH_PG_HOST", "127.0.0.1")
PG_PORT = int(os.environ.get("BENCH_PG_PORT", "5432"))
PG_USER = os.environ.get("BENCH_PG_USER", "postgres")
SAGA_DB = "saga_bench"
DBOS_DB = "dbos_bench"
WORK = ROOT / "bench" / ".work"  # logs and scratch files of the last run (git-ignored)
SECRET_KEY = "bench-only-secret-key-not-for-production"
_STARTED = time.monotonic()


def pg_url(database: str) -> str:
    return f"postgresql://{PG_USER}@{PG_HOST}:{PG_PORT}/{database}"


def progress(message: str) -> None:
    """One progress line on stderr (runs are long; stdout carries only the table)."""
    print(f"[bench {time.monotonic() - _STARTED:6.1f}s] {message}", file=sys.stderr, flush=True)


# --- statistics ---------------------------------------------------------------------------------------------------


def percentile(samples: Sequence[float], q: float) -> float:
    """The q-th percentile (0..100) with linear interpolation between closest ranks (numpy's default)."""
    if not samples:
        return math.nan
    if not 0 <= q <= 100:
        raise ValueError(f"percentile must be within 0..100, got {q}")
    ordered = sorted(samples)
    position = (len(ordered) - 1) * q / 100
    low = math.floor(position)
    high = math.ceil(position)
    if low == high:
        return ordered[low]
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def median(values: Iterable[float]) -> float:
    data = [v for v in values if not math.isnan(v)]
    return statistics.median(data) if data else math.nan


@dataclass
class Summary:
    """Latency samples of one figure, pooled over all rounds, plus the per-round medians."""

    p50: float
    p99: float
    n: int
    round_medians: list[float] = field(default_factory=list)

    def as_dict(self, scale: float = 1.0) -> dict[str, Any]:
        return {
            "p50": self.p50 * scale,
            "p99": self.p99 * scale,
            "n": self.n,
            "round_medians": [m * scale for m in self.round_medians],
        }


def summarize(rounds: Sequence[Sequence[float]]) -> Summary:
    """p50 is the median of the per-round medians (robust to one slow round); p99 is over all samples pooled."""
    pooled = [s for samples in rounds for s in samples]
    medians = [percentile(list(samples), 50) for samples in rounds if samples]
    return Summary(p50=median(medians), p99=percentile(pooled, 99), n=len(pooled), round_medians=medians)


def ratio(numerator: float, denominator: float) -> float:
    if denominator == 0 or math.isnan(numerator) or math.isnan(denominator):
        return math.nan
    return numerator / denominator


def paired_ratio(numerators: Sequence[float], denominators: Sequence[float]) -> float:
    """Median of per-round ratios: each round's figures were taken side by side, so drift cancels within a pair."""
    pairs = [ratio(a, b) for a, b in zip(numerators, denominators, strict=False)]
    return median(pairs)


# --- verdicts and the table -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Target:
    """A target ratio from issue 10: `value` compared with `limit` by `op` ("<=" or ">=")."""

    name: str
    value: float
    op: str
    limit: float
    detail: str = ""
    # "x": a ratio shown as 1.30x; "%": a share shown as 10%; "count": a plain number; "s" or "ms": a duration
    unit: str = "x"

    @property
    def verdict(self) -> str:
        if math.isnan(self.value):
            return "N/A"
        if self.op == "<=":
            return "PASS" if self.value <= self.limit else "MISS"
        if self.op == ">=":
            return "PASS" if self.value >= self.limit else "MISS"
        raise ValueError(f"unknown comparison {self.op!r}")

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "value": None if math.isnan(self.value) else self.value,
            "op": self.op,
            "limit": self.limit,
            "verdict": self.verdict,
            "detail": self.detail,
            "unit": self.unit,
        }

    def shown(self, value: float) -> str:
        if self.unit == "%":
            return fmt(value * 100, "%", 1).replace(" %", "%")
        if self.unit == "count":
            return fmt(value, digits=1)
        if self.unit == "s":
            return fmt(value, "s")
        if self.unit == "ms":
            return fmt(value, "ms", 3)
        return fmt(value) + "x"


def fmt(value: float | None, unit: str = "", digits: int = 2) -> str:
    """A number for the table: NaN/None as 'n/a', thousands separated, unit appended."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    if abs(value) >= 1000:
        text = f"{value:,.0f}"
    elif abs(value) >= 100:
        text = f"{value:.0f}"
    elif abs(value) >= 10:
        text = f"{value:.1f}"
    else:
        text = f"{value:.{digits}f}"
    return f"{text} {unit}".rstrip()


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(str(c)) for c in col) for col in zip(header, *rows, strict=False)]

    def line(cells: Sequence[str]) -> str:
        return "| " + " | ".join(str(c).ljust(w) for c, w in zip(cells, widths, strict=False)) + " |"

    out = [line(header), "|" + "|".join("-" * (w + 2) for w in widths) + "|"]
    out.extend(line(r) for r in rows)
    return "\n".join(out)


def target_rows(targets: Sequence[Target]) -> list[list[str]]:
    return [[t.name, t.shown(t.value), f"{t.op} {t.shown(t.limit)}", t.verdict, t.detail] for t in targets]


def replace_marked(text: str, body: str, begin: str = "<!-- bench:begin -->", end: str = "<!-- bench:end -->") -> str:
    """Replace what lies between the two markers (kept) with `body`; both markers must be present, in order."""
    start = text.find(begin)
    stop = text.find(end)
    if start < 0 or stop < 0 or stop < start:
        raise ValueError(f"markers {begin} ... {end} not found in order")
    return text[: start + len(begin)] + "\n" + body.strip("\n") + "\n" + text[stop:]


def backends_started() -> int:
    """Sessions ever started on this process's database: PostgreSQL's own count, across every process. A new
    backend's connect is counted when it ends its first transaction, so wait a moment before the last reading."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_stat_clear_snapshot()")  # the counters now, not this transaction's snapshot
        cursor.execute("SELECT sessions FROM pg_stat_database WHERE datname = current_database()")
        (sessions,) = cursor.fetchone()
    return int(sessions)


# --- waiting and processes ------------------------------------------------------------------------------------------


def poll(predicate: Callable[[], bool], timeout: float, what: str, interval: float = 0.005) -> float:
    """Wait until predicate() is true; returns the seconds waited. Raises TimeoutError after `timeout` seconds."""
    started = time.monotonic()
    deadline = started + timeout
    pause = interval
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(pause)
        pause = min(pause * 1.5, 0.05)
    return time.monotonic() - started


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def port_open(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


class Child:
    """A child process in its own session (process group), logging to a file; stop() and kill() act on the group."""

    def __init__(self, name: str, command: Sequence[str], env: dict[str, str], log_dir: Path) -> None:
        self.name = name
        self.command = list(command)
        self.env = env
        self.log = log_dir / f"{name}.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> Child:
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(
                self.command, cwd=ROOT, env=self.env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )
        return self

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def tail(self, chars: int = 3000) -> str:
        return self.log.read_text(errors="replace")[-chars:] if self.log.exists() else ""

    def wait_for(self, predicate: Callable[[], bool], timeout: float, what: str) -> None:
        def ready() -> bool:
            if not self.alive():
                raise RuntimeError(f"{self.name} exited early:\n{self.tail()}")
            return predicate()

        try:
            poll(ready, timeout, f"{self.name}: {what}", interval=0.05)
        except TimeoutError as exc:
            raise TimeoutError(f"{exc}\n{self.tail()}") from None

    def log_contains(self, needle: bytes) -> bool:
        return self.log.exists() and needle in self.log.read_bytes()

    def _signal_group(self, sig: int) -> None:
        assert self.proc is not None
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, sig)

    def kill(self) -> None:
        """SIGKILL to the whole group: a crash, no cleanup."""
        if self.proc is None:
            return
        self._signal_group(signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=30)

    def stop(self, timeout: float = 15) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self._signal_group(signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=timeout)
        self.kill()  # whatever is left of the group (forked pool children) goes too


class Children:
    """Every child started by the run, stopped in reverse order whatever happens (used in a try/finally)."""

    def __init__(self, log_dir: Path) -> None:
        self.log_dir = log_dir
        self.started: list[Child] = []

    def start(self, name: str, command: Sequence[str], env: dict[str, str]) -> Child:
        child = Child(name, command, env, self.log_dir)
        self.started.append(child)
        return child.start()

    def stop_all(self) -> None:
        for child in reversed(self.started):
            try:
                child.stop()
            except Exception as exc:  # keep stopping the others
                progress(f"could not stop {child.name}: {exc}")
        self.started.clear()


def start_redis(children: Children) -> str:
    """A private redis-server on a free loopback port (no persistence); returns its base URL (no db number)."""
    binary = shutil.which("redis-server")
    if not binary:
        raise RuntimeError("redis-server is not installed (apt-get install redis-server)")
    port = free_port()
    workdir = children.log_dir / "redis"
    workdir.mkdir(parents=True, exist_ok=True)
    command = [binary, "--bind", "127.0.0.1", "--port", str(port), "--save", "", "--appendonly", "no"]
    child = children.start("redis", [*command, "--dir", str(workdir)], dict(os.environ))
    child.wait_for(lambda: port_open(port), 20, "accepting connections")
    return f"redis://127.0.0.1:{port}"


# --- databases and environment --------------------------------------------------------------------------------------


def ensure_database(name: str) -> bool:
    """Create the PostgreSQL database if it does not exist; True when it was created now."""
    import psycopg

    with psycopg.connect(pg_url("postgres"), autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone()
        if exists:
            return False
        conn.execute(f'CREATE DATABASE "{name}"')
        return True


def server_versions() -> dict[str, str]:
    import psycopg

    with psycopg.connect(pg_url("postgres"), autocommit=True) as conn:
        versions = {
            name: str(conn.execute(f"SHOW {setting}").fetchone()[0])  # type: ignore[index]
            for name, setting in (
                ("postgresql", "server_version"),
                ("postgresql_fsync", "fsync"),
                ("postgresql_synchronous_commit", "synchronous_commit"),
            )
        }
    binary = shutil.which("redis-server")
    if binary:
        out = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=10).stdout
        versions["redis"] = next((p.split("=", 1)[1] for p in out.split() if p.startswith("v=")), out.strip())
    return versions


def machine() -> dict[str, Any]:
    model = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"nproc": os.cpu_count(), "cpu": model, "python": sys.version.split()[0], "loadavg": os.getloadavg()}


def saga_env(**extra: str) -> dict[str, str]:
    """The environment of this process and of every child that runs our code: bench database, production-like
    settings (DEBUG off, so Django does not record every query), quiet logs."""
    env = {
        **os.environ,
        "DATABASE_URL": pg_url(SAGA_DB),
        "DJANGO_SETTINGS_MODULE": "saga_project.settings",
        "SECRET_KEY": SECRET_KEY,
        "DEBUG": "false",
        "LOG_LEVEL": "WARNING",
        "CELERY_BROKER_URL": "",
        "SAGA_FILE_ROOT": str(WORK / "files"),
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep),
    }
    env.update(extra)
    return env


def setup_django(**extra: str) -> None:
    """Point this process at the bench database, then django.setup(), migrate, and load the example registry."""
    ensure_database(SAGA_DB)
    os.environ.update(saga_env(**extra))
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0, interactive=False)
    from registry.services import registry_load_file

    registry_load_file(ROOT / "examples" / "action_registry.json")


def start_celery_worker(
    children: Children, name: str, app: str, env: dict[str, str], concurrency: int = 2, timeout: float = 90
) -> Child:
    """`celery -A <app> worker -c <concurrency>` (prefork) on loopback Redis; returns once it says ready."""
    child = launch_celery_worker(children, name, app, env, concurrency)
    wait_celery_ready(child, timeout)
    return child


def wait_celery_ready(child: Child, timeout: float = 90) -> None:
    child.wait_for(lambda: child.log_contains(b" ready."), timeout, "ready")


def launch_celery_worker(children: Children, name: str, app: str, env: dict[str, str], concurrency: int = 2) -> Child:
    """Start the worker without waiting for it (start several, then wait_celery_ready each)."""
    command = [
        sys.executable,
        "-m",
        "celery",
        "-A",
        app,
        "worker",
        "--concurrency",
        str(concurrency),
        "--without-gossip",
        "--without-mingle",
        "--without-heartbeat",
        "--loglevel",
        "INFO",
        "--hostname",
        f"{name}-{os.getpid()}-{time.monotonic_ns()}@127.0.0.1",
    ]
    return children.start(name, command, env)
