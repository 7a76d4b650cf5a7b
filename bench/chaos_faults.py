"""The chaos suite's fault injector: one thread, one fault at a time, every kind once per round in an order drawn by
a seeded random generator.

Kinds: SIGKILL a prefork pool child (its parent forks a new one), SIGKILL a whole worker (parent and children)
and start it again, SIGKILL a `serve` replica or the proxy and start it again, SIGKILL the proxy while it holds a
call for a person (the call must be withdrawn, never sent), terminate the product's PostgreSQL backends, restart
the private Redis (its queue is lost: no persistence), SIGSTOP a worker past its lease then SIGCONT it, make
the sink delay or drop its next answers after it applied their effect, and make the downstream MCP server flood the
proxy with notifications during its next calls (bounded: bench/chaos_downstream.py FLOOD_LIMITS).
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import httpx
import psycopg

from bench.chaos_fleet import Fleet, Member
from bench.chaos_sink import Sink

KINDS = (
    "worker_child_sigkill",
    "worker_sigkill",
    "serve_sigkill",
    "proxy_sigkill",
    "proxy_held_sigkill",
    "pg_terminate_backend",
    "redis_restart",
    "worker_sigstop",
    "sink_delay_after_apply",
    "sink_drop_after_apply",
    "downstream_notification_flood",
)
PROXY_KINDS = ("proxy_sigkill", "proxy_held_sigkill")  # the proxy replica is killed (bench/chaos.py --proxies)
NEEDS_A_PROXY = (*PROXY_KINDS, "downstream_notification_flood")  # only with a proxy replica and its downstream
# One flood fault: the downstream's next calls each send this many notifications at most, for this long at most.
FLOOD = {"calls": 3, "count": 5000, "seconds": 2.0}
# How long the held-call fault waits for its call to be held before it gives up: a new session through a proxy
# replica that an earlier fault may be restarting, first listing and the hold, on a runner also running other tests
# (a quiet machine takes a second or two; a loaded CI runner once took more than 15 s).
HELD_SECONDS = 45.0
ACTION_TIMEOUT_SECONDS = 2  # the chaos actions' timeout_seconds (bench/chaos.py)


@dataclass
class Pause:
    """The node attempts a paused worker held when it was stopped: (node id, fence token at the pause)."""

    worker: str
    held: list[tuple[str, int]]
    stopped_at: float = 0.0
    resumed_at: float = 0.0


@dataclass
class Faults:
    counts: Counter[str] = field(default_factory=Counter)
    errors: list[str] = field(default_factory=list)
    pauses: list[Pause] = field(default_factory=list)
    timeline: list[tuple[float, float, str]] = field(default_factory=list)  # (start, end, kind), wall clock
    last_fault_at: float = 0.0
    held_kills: list[tuple[str, str]] = field(default_factory=list)  # (session saga, held node) whose holder died
    # Client names of held-call faults abandoned as the faults stopped: a call held after that waits for a person.
    abandoned_holds: list[str] = field(default_factory=list)
    longest_hold_wait: float = 0.0  # seconds from an agent's first try to its call held (a loaded runner is slow)
    notifications_flooded: int = 0  # what the downstream sent the proxy during floods, in all (read at stop)


class Abandoned(Exception):
    """The run ended while a fault was still being set up: not injected, and not a failure to inject."""


class Injector:
    def __init__(
        self, fleet: Fleet, sink: Sink, pg_url: str, seed: int, interval: float, lease_seconds: int, kinds: list[str]
    ) -> None:
        self.fleet = fleet
        self.sink = sink
        self.pg_url = pg_url
        self.random = random.Random(seed)
        self.interval = interval
        self.lease_seconds = lease_seconds
        self.kinds = kinds
        self.faults = Faults()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="chaos-injector", daemon=True)

    def start(self) -> Injector:
        self._thread.start()
        return self

    def stop(self, timeout: float = 120) -> None:
        self._stop.set()
        self._thread.join(timeout)
        self.sink.disarm()
        if self.fleet.downstream is not None:
            with contextlib.suppress(httpx.HTTPError):  # no figure rather than no report
                self.faults.notifications_flooded = _flood(self.fleet.downstream.port, {"calls": 0})["flooded"]

    def _loop(self) -> None:
        deck: list[str] = []
        while not self._stop.wait(self.random.uniform(0.5, 1.5) * self.interval):
            if not deck:  # every kind once per round, in a seeded random order: a short run still injects each
                deck = self.random.sample(self.kinds, len(self.kinds))
            kind = deck.pop()
            begun = time.time()
            try:
                getattr(self, kind)()
                self.faults.counts[kind] += 1
            except Abandoned:
                pass
            except Exception as exc:  # a fault that could not be injected is reported, never hidden
                self.faults.errors.append(f"{kind}: {type(exc).__name__}: {exc}")
            self.faults.last_fault_at = time.monotonic()
            self.faults.timeline.append((round(begun, 3), round(time.time(), 3), kind))

    def _worker(self) -> Member:
        return self.random.choice(self.fleet.workers)

    # --- the faults --------------------------------------------------------------------------------------------

    def worker_child_sigkill(self) -> None:
        children = self._worker().children()
        if not children:
            raise RuntimeError("the worker has no pool child to kill")
        signal_pid(self.random.choice(children), signal.SIGKILL)

    def worker_sigkill(self) -> None:
        self.fleet.restart_worker(self._worker())

    def serve_sigkill(self) -> None:
        self.fleet.restart_server(self.random.choice(self.fleet.servers))

    def proxy_sigkill(self) -> None:
        """Kill the proxy, often while a call is out (the downstream holds each answer back a little)."""
        self.fleet.restart_proxy(self.random.choice(self.fleet.proxies))

    def proxy_held_sigkill(self) -> None:
        """An agent's call is held for a person on a proxy replica, and that proxy is killed while it holds it."""
        member = self.random.choice(self.fleet.proxies)
        name = f"chaos-held-{len(self.faults.held_kills)}-{self.random.randrange(10**6)}"
        url = f"http://127.0.0.1:{member.port}/proxy/mcp"
        seen = threading.Event()
        threading.Thread(target=hold_a_call, args=(url, name, seen), name=name, daemon=True).start()
        started = time.monotonic()
        try:
            while (held := _held_call(self.pg_url, name)) is None:
                if self._stop.is_set():
                    self.faults.abandoned_holds.append(name)
                    raise Abandoned
                if time.monotonic() > started + HELD_SECONDS:
                    raise RuntimeError(f"no call of {name} was held within {HELD_SECONDS:.0f}s")
                time.sleep(0.05)
        finally:
            seen.set()  # the agent stops trying once its call was held (or the fault gave up)
        self.faults.longest_hold_wait = max(self.faults.longest_hold_wait, time.monotonic() - started)
        self.fleet.restart_proxy(member)
        self.faults.held_kills.append(held)

    def pg_terminate_backend(self) -> None:
        with psycopg.connect(self.pg_url, autocommit=True, application_name="chaos-injector") as conn:
            rows = conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database()"
                " AND application_name IN ('chaos-worker', 'chaos-serve') AND pid <> pg_backend_pid()"
            ).fetchall()
        if not rows:
            raise RuntimeError("no product backend to terminate (are the processes tagged chaos-worker/-serve?)")

    def redis_restart(self) -> None:
        self.fleet.restart_redis()

    def worker_sigstop(self) -> None:
        """Freeze a worker (heartbeats too) past its lease, so the sweep fences it off; then let it write late."""
        member, held = self._holder()
        worker_id = member.env["SAGA_WORKER_ID"]
        member.paused = True
        stopped_at = time.time()
        member.group_signal(signal.SIGSTOP)
        try:
            self._stop.wait(self.lease_seconds + 2.0)
        finally:
            member.group_signal(signal.SIGCONT)
            member.paused = False
        self.faults.pauses.append(Pause(worker_id, held, stopped_at, time.time()))
        # Nothing else happens meanwhile: the woken worker's late write reaches the coordinator unhindered.
        time.sleep(ACTION_TIMEOUT_SECONDS + 2.0)

    def _holder(self) -> tuple[Member, list[tuple[str, int]]]:
        """The worker in the middle of a call the sink holds ("slow"), else any worker holding an attempt."""
        by_id = {m.env["SAGA_WORKER_ID"]: m for m in self.fleet.workers}
        before = len(self.sink.slow_keys)
        self.sink.arm("slow")
        deadline = time.monotonic() + 3.0
        while time.monotonic() < deadline:
            if len(self.sink.slow_keys) > before:
                held = _held(self.pg_url, self.sink.slow_keys[before].partition(":")[0])
                if held:
                    owner = sorted(held)[0]
                    return by_id[owner], held[owner]
            time.sleep(0.01)
        self.sink.disarm()
        held = _held(self.pg_url)
        owner = self.random.choice(sorted(held)) if held else ""
        return (by_id[owner], held[owner]) if owner else (self._worker(), [])

    def sink_delay_after_apply(self) -> None:
        self.sink.arm("delay", self.random.randint(1, 3))

    def sink_drop_after_apply(self) -> None:
        self.sink.arm("drop", self.random.randint(1, 3))

    def downstream_notification_flood(self) -> None:
        """The downstream floods the proxy with notifications during its next calls (log messages and progress
        relayed to the agents in flight, list_changed, resources/updated, unknown methods): the proxy must drop what
        is past its rate and keep every invariant."""
        if self.fleet.downstream is None:
            raise RuntimeError("no downstream MCP server to flood from (run with --proxies 1)")
        _flood(self.fleet.downstream.port, FLOOD)


def hold_a_call(url: str, name: str, held: threading.Event) -> None:
    """An agent's session calling chaos_hold, which the proxy holds until it is killed (its answer never comes);
    it connects again while the proxy is not up yet (restarted by an earlier fault), until `held` is set."""
    import anyio
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.types import Implementation

    from bench.chaos_drive import TOKEN

    async def call() -> None:
        http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"}, timeout=httpx2.Timeout(30.0))
        info = Implementation(name=name, version="1.0.0")
        with anyio.fail_after(HELD_SECONDS * 4):
            async with (
                http,
                Client(streamable_http_client(url, http_client=http), mode="legacy", client_info=info) as client,
            ):
                await client.call_tool("chaos_hold", {"name": name})

    while not held.is_set():
        with contextlib.suppress(BaseException):  # the proxy dies under the call: the transport fails, as it should
            anyio.run(call)
        held.wait(0.2)


def _held_call(pg_url: str, client_name: str) -> tuple[str, str] | None:
    """(session saga, node) of the call of `client_name`'s session held for a person, once there is one."""
    sql = (
        "SELECT s.id::text, n.id::text FROM sagas_node n JOIN sagas_saga s ON s.id = n.saga_id"
        " WHERE n.status = 'WAITING_APPROVAL' AND s.metadata -> 'proxy' -> 'client' ->> 'name' = %s"
    )
    with psycopg.connect(pg_url, autocommit=True, application_name="chaos-injector") as conn:
        row = conn.execute(sql, [client_name]).fetchone()
    return (str(row[0]), str(row[1])) if row else None


def _flood(port: int, armed: dict[str, Any]) -> dict[str, Any]:
    """Arm the downstream's flood (loopback only); its answer: {"flooded": notifications sent so far, ...}."""
    answer = httpx.post(f"http://127.0.0.1:{port}/flood", json=armed, timeout=10)
    answer.raise_for_status()
    result: dict[str, Any] = answer.json()
    return result


def signal_pid(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError):  # it exited on its own meanwhile
        os.kill(pid, sig)


def _held(pg_url: str, step_id: str = "") -> dict[str, list[tuple[str, int]]]:
    """Node attempts in flight by lease owner (the chaos workers' SAGA_WORKER_ID), optionally of one step."""
    sql = (
        "SELECT lease_owner, id::text, fence_token FROM sagas_node"
        " WHERE status = 'EXECUTING' AND lease_owner LIKE 'chaos-worker-%%'"
    )
    with psycopg.connect(pg_url, autocommit=True, application_name="chaos-injector") as conn:
        if step_id:
            rows: list[Any] = conn.execute(sql + " AND step_id::text = %s", [step_id]).fetchall()
        else:
            rows = conn.execute(sql).fetchall()
    held: dict[str, list[tuple[str, int]]] = {}
    for owner, node_id, fence in rows:
        held.setdefault(str(owner), []).append((str(node_id), int(fence)))
    return held
