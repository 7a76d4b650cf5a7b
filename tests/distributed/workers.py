"""Real Celery worker processes and private Redis servers for the distributed tests (loopback only)."""

from __future__ import annotations

import itertools
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from django.db import connection

ROOT = Path(__file__).resolve().parents[2]
READY_DEADLINE_SECONDS = 60


# Ports for the servers tests start, below Linux's ephemeral range (32768-60999) so that no outgoing connection
# takes one between the check and the server's bind, and one block per xdist worker so that two workers never hand
# out the same port (a server that lost the race would find another worker's server answering at its address).
_PORT_BLOCK = 1500
_PORT_BASE = 20000
_ports_handed_out = itertools.count()


def free_port() -> int:
    """A loopback port nobody listens on, reserved to this test process's block."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw")
    base = _PORT_BASE + (int(worker) if worker.isdigit() else 0) % 8 * _PORT_BLOCK
    for _ in range(_PORT_BLOCK):
        port = base + next(_ports_handed_out) % _PORT_BLOCK
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free loopback port in {base}-{base + _PORT_BLOCK - 1}; stop stray test servers")


def shared_database_url() -> str:
    """The pytest-django test database, as a URL another process can use."""
    db = connection.settings_dict
    if connection.vendor == "sqlite":
        return f"sqlite:///{db['NAME']}"
    host = db.get("HOST") or "127.0.0.1"
    return f"postgresql://{db.get('USER') or 'postgres'}@{host}:{db.get('PORT') or 5432}/{db['NAME']}"


def _poll(predicate: object, deadline_seconds: float, what: str, log: Path | None = None) -> None:
    deadline = time.monotonic() + deadline_seconds
    pause = 0.02
    while not predicate():  # type: ignore[operator]
        if time.monotonic() > deadline:
            tail = log.read_text()[-4000:] if log and log.exists() else ""
            raise AssertionError(f"timed out waiting for {what}\n{tail}")
        time.sleep(pause)
        pause = min(pause * 2, 0.25)


class CeleryWorker:
    """`celery -A saga_project worker` in its own process (thread pool: one process, so SIGKILL kills it all)."""

    def __init__(self, broker_url: str, log_dir: Path, *, concurrency: int = 4, lease_seconds: int = 3) -> None:
        self.broker_url = broker_url
        self.concurrency = concurrency
        self.lease_seconds = lease_seconds
        self.log = log_dir / f"celery-worker-{time.monotonic_ns()}.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> CeleryWorker:
        env = {
            **os.environ,
            "DATABASE_URL": shared_database_url(),
            "CELERY_BROKER_URL": self.broker_url,
            "SAGA_LEASE_SECONDS": str(self.lease_seconds),
            "DJANGO_SETTINGS_MODULE": "saga_project.settings",
        }
        command = [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "saga_project",
            "worker",
            "--pool",
            "threads",
            "--concurrency",
            str(self.concurrency),
            "--without-gossip",
            "--without-mingle",
            "--without-heartbeat",
            "--loglevel",
            "INFO",
            "--hostname",
            f"test-{os.getpid()}-{time.monotonic_ns()}@127.0.0.1",
        ]
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen(command, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
        _poll(self._ready, READY_DEADLINE_SECONDS, "the celery worker to be ready", self.log)
        return self

    def _ready(self) -> bool:
        assert self.proc is not None
        if self.proc.poll() is not None:
            raise AssertionError(f"celery worker exited with {self.proc.returncode}:\n{self.log.read_text()[-4000:]}")
        return b" ready." in self.log.read_bytes()

    def pause(self) -> None:
        """SIGSTOP: the process (heartbeats included) freezes mid-action, as in a long GC pause or a partition."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGCONT)

    def kill(self) -> None:
        """SIGKILL: no cleanup, no acknowledgement, no lease release — a crash."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=30)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.kill()


class RedisServer:
    """A private redis-server on a free loopback port, which a test may stop and start again (an outage)."""

    def __init__(self, workdir: Path) -> None:
        binary = shutil.which("redis-server")
        assert binary, "redis-server is not installed; .ci/run installs it (apt-get install redis-server)"
        self.binary = binary
        self.port = free_port()
        self.workdir = workdir
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> RedisServer:
        command = [
            self.binary,
            "--bind",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            str(self.workdir),
        ]
        self.proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        _poll(self._accepting, 20, f"redis-server on port {self.port}")
        return self

    def _accepting(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as sock:
                sock.sendall(b"PING\r\n")
                return sock.recv(16).startswith(b"+PONG")
        except OSError:
            return False

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=30)
