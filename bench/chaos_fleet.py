"""The chaos suite's processes: a private Redis, prefork Celery workers, `semantic-saga serve` replicas, the proxy
(a `serve` replica with SAGA_PROXY_CONFIG, clients reach it at /proxy/mcp) and the downstream MCP server behind it.

Each member keeps its slot (name, port) across restarts, so a fault can kill it and the fleet can bring the same
member back. Every wait is bounded; every child runs in its own process group (bench.common.Child).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import sys
import threading
from collections import Counter
from pathlib import Path

import httpx

from bench.common import Child, free_port, poll, port_open

READY_SECONDS = 90.0


class Member:
    """One slot of the fleet: the command that (re)starts it and the Child currently running it."""

    def __init__(self, name: str, command: list[str], env: dict[str, str], log_dir: Path, port: int = 0) -> None:
        self.name = name
        self.command = command
        self.env = env
        self.log_dir = log_dir
        self.port = port
        self.child: Child | None = None
        self.restarts = 0
        self.paused = False

    def start(self) -> Member:
        self.child = Child(self.name, self.command, self.env, self.log_dir).start()
        return self

    def alive(self) -> bool:
        return self.child is not None and self.child.alive()

    @property
    def pid(self) -> int:
        assert self.child is not None and self.child.proc is not None
        return self.child.proc.pid

    def group_signal(self, sig: int) -> None:
        with contextlib.suppress(ProcessLookupError, AssertionError):
            os.killpg(self.pid, sig)

    def kill(self) -> None:
        """SIGKILL to the whole group (the parent and its prefork children): a crash, nothing cleaned up."""
        if self.child is not None:
            self.child.kill()

    def children(self) -> list[int]:
        """The direct children of the parent (a prefork worker's pool processes)."""
        try:
            text = Path(f"/proc/{self.pid}/task/{self.pid}/children").read_text()
        except (OSError, AssertionError):
            return []
        return [int(pid) for pid in text.split()]

    def stop(self) -> None:
        if self.paused:
            self.group_signal(signal.SIGCONT)
            self.paused = False
        if self.child is not None:
            self.child.stop(timeout=10)


class Fleet:
    def __init__(self, log_dir: Path, base_env: dict[str, str], lease_seconds: int) -> None:
        self.log_dir = log_dir
        self.base_env = base_env
        self.lease_seconds = lease_seconds
        self.redis: Member | None = None
        self.workers: list[Member] = []
        self.servers: list[Member] = []
        self.proxies: list[Member] = []
        self.downstream: Member | None = None
        self.exited: Counter[str] = Counter()  # member name -> exits on its own, each restarted by supervise()
        self._lock = threading.Lock()  # one restart of a member at a time (the injector's or the supervisor's)

    # --- redis ------------------------------------------------------------------------------------------------

    def start_redis(self) -> str:
        binary = shutil.which("redis-server")
        if not binary:
            raise SystemExit("chaos: redis-server is not installed; install it (apt-get install redis-server)")
        port = free_port()
        workdir = self.log_dir / "redis"
        workdir.mkdir(parents=True, exist_ok=True)
        command = [binary, "--bind", "127.0.0.1", "--port", str(port), "--save", "", "--appendonly", "no"]
        self.redis = Member("redis", [*command, "--dir", str(workdir)], dict(os.environ), self.log_dir, port)
        self.restart_redis(kill=False)
        return f"redis://127.0.0.1:{port}/0"

    def restart_redis(self, kill: bool = True) -> None:
        assert self.redis is not None
        if kill:
            self.redis.kill()
            self.redis.restarts += 1
        self.redis.start()
        port = self.redis.port
        poll(lambda: port_open(port), 20, f"redis-server on port {port}", interval=0.02)

    # --- celery workers -----------------------------------------------------------------------------------------

    def add_worker(self, index: int, broker_url: str, concurrency: int) -> Member:
        env = {**self.base_env, "CELERY_BROKER_URL": broker_url, "SAGA_LEASE_SECONDS": str(self.lease_seconds)}
        env["DATABASE_URL"] = _named(env["DATABASE_URL"], "chaos-worker")
        env["SAGA_WORKER_ID"] = f"chaos-worker-{index}"  # the pause fault finds the attempts this slot holds
        command = [
            sys.executable, "-m", "celery", "-A", "saga_project", "worker",
            "--pool", "prefork", "--concurrency", str(concurrency),
            "--without-gossip", "--without-mingle", "--without-heartbeat", "--loglevel", "INFO",
            "--hostname", f"chaos{index}-{os.getpid()}@127.0.0.1",
        ]  # fmt: skip
        member = Member(f"worker-{index}", command, env, self.log_dir).start()
        self.workers.append(member)
        return member

    def wait_worker(self, member: Member) -> None:
        assert member.child is not None
        child = member.child
        child.wait_for(lambda: child.log_contains(b" ready."), READY_SECONDS, "ready")

    def restart_worker(self, member: Member) -> None:
        """Kill and start again without waiting for "ready": the next fault may well hit a worker still starting."""
        self._replace(member)

    def _replace(self, member: Member) -> None:
        with self._lock:
            member.kill()
            member.restarts += 1
            member.start()

    def supervise(self) -> None:
        """What systemd's Restart=always or a Kubernetes Deployment does for a deployment: start again a worker,
        replica or proxy that exited on its own (not one the injector is restarting or has frozen)."""
        for member in [*self.workers, *self.servers, *self.proxies]:
            with self._lock:
                if member.child is None or member.paused or member.alive():
                    continue
                self.exited[member.name] += 1
                member.start()

    # --- serve replicas -------------------------------------------------------------------------------------------

    def add_server(self, index: int, broker_url: str, tokens: Path, proxy_config: Path | None = None) -> Member:
        """A `serve` replica; with `proxy_config`, a proxy replica (kept in `proxies`, not among the REST ones)."""
        port = free_port()
        env = {
            **self.base_env,
            "CELERY_BROKER_URL": broker_url,
            "SAGA_LEASE_SECONDS": str(self.lease_seconds),
            "SAGA_AUTH_MODE": "static",
            "SAGA_AUTH_STATIC_TOKENS": str(tokens),
            "SAGA_PUBLIC_URL": f"http://127.0.0.1:{port}",
        }
        env["DATABASE_URL"] = _named(env["DATABASE_URL"], "chaos-serve")
        if proxy_config is not None:
            env["SAGA_PROXY_CONFIG"] = str(proxy_config)
        command = [sys.executable, "-m", "saga_project.cli", "serve", "--port", str(port), "--log-level", "warning"]
        name = f"{'proxy' if proxy_config else 'serve'}-{index}"
        member = Member(name, command, env, self.log_dir, port).start()
        (self.proxies if proxy_config else self.servers).append(member)
        return member

    def wait_server(self, member: Member) -> None:
        assert member.child is not None
        member.child.wait_for(lambda: _healthy(member.port), READY_SECONDS, "healthy")

    def restart_server(self, member: Member) -> None:
        """Kill and start again; wait until it is healthy only when no other replica is (clients need one)."""
        self._replace(member)
        if not any(_healthy(other.port) for other in self.servers if other is not member):
            self.wait_server(member)

    def restart_proxy(self, member: Member) -> None:
        """Kill and start again without waiting: a proxied client retries until the proxy answers again."""
        self._replace(member)

    def live_servers(self) -> list[Member]:
        return [m for m in self.servers if m.alive()]

    # --- the downstream MCP server (never faulted: it is the world the proxied calls act on) ------------------

    def start_downstream(self, record: Path) -> str:
        port = free_port()
        command = [sys.executable, "-m", "bench.chaos_downstream", "--port", str(port), "--record", str(record)]
        self.downstream = Member("downstream", command, self.base_env, self.log_dir, port).start()
        poll(lambda: port_open(port), READY_SECONDS, f"the downstream MCP server on port {port}", interval=0.05)
        return f"http://127.0.0.1:{port}/mcp"

    def stop_all(self) -> None:
        members = [*self.proxies, *self.servers, *self.workers, *([self.redis] if self.redis else [])]
        for member in [*members, *([self.downstream] if self.downstream else [])]:
            with contextlib.suppress(Exception):
                member.stop()


def _named(url: str, application_name: str) -> str:
    """Tag a process's PostgreSQL sessions, so the injector terminates the product's backends, not its own."""
    separator = "&" if "?" in url else "?"
    return f"{url}{separator}application_name={application_name}"


def _healthy(port: int) -> bool:
    try:
        return httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


class Supervisor:
    """Fleet.supervise() every `interval` seconds on a thread of its own, from start() until stop()."""

    def __init__(self, fleet: Fleet, interval: float = 0.5) -> None:
        self.fleet = fleet
        self.interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="chaos-supervisor", daemon=True)

    def start(self) -> Supervisor:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            self.fleet.supervise()
