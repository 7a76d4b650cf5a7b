"""The chaos suite's load: sagas of several shapes driven through the REST API of the `serve` replicas.

A client does what a real one would under faults: a request that got no answer (a replica was killed, the
database connection was cut) is sent again to another replica. Planning names each node by key, so a repeated
plan returns the node it created; a repeated begin may leave an empty saga behind (counted, not driven). The
harness acts as the operator of approval-gated nodes and commits a saga once every node completed.
"""

from __future__ import annotations

import contextlib
import itertools
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx

from bench.chaos_fleet import Fleet

TOKEN = "chaos-operator-token-0001"
TOKENS = {TOKEN: {"principal_id": "chaos-operator", "tenant_id": "chaos", "roles": ["operator"]}}
TERMINAL = {"COMMITTED", "ROLLED_BACK", "ROLLBACK_FAILED", "RECOVERY_REQUIRED"}
POLL_SECONDS = 0.3
REQUEST_DEADLINE = 90.0  # one request may wait this long for a replica to come back, then the saga is given up

Plan = list[tuple[str, str, list[str]]]  # (key, action, depends_on)
SHAPES: dict[str, Plan] = {
    "linear": [("a", "chaos_step", []), ("b", "chaos_step", ["a"]), ("c", "chaos_step", ["b"])],
    "fan_out": [("root", "chaos_step", []), *[(f"leaf{i}", "chaos_step", ["root"]) for i in range(4)]],
    "approval": [("prep", "chaos_step", []), ("gate", "chaos_gated", ["prep"]), ("after", "chaos_step", ["gate"])],
    "compensating": [("a", "chaos_step", []), ("b", "chaos_step", ["a"]), ("boom", "chaos_fail", ["b"])],
    "not_idempotent": [("once", "chaos_once", []), ("after", "chaos_step", ["once"])],
}


class ApiError(RuntimeError):
    pass


@dataclass
class SagaRun:
    shape: str
    saga_id: str = ""
    status: str = ""
    approvals: int = 0
    error: str = ""
    seconds: float = 0.0


@dataclass
class Load:
    runs: list[SagaRun] = field(default_factory=list)
    retried_requests: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)


class Api:
    def __init__(self, fleet: Fleet, load: Load) -> None:
        self.fleet = fleet
        self.load = load
        self.headers = {"Authorization": f"Bearer {TOKEN}"}
        self._turn = itertools.count()

    def call(self, method: str, path: str, body: dict[str, Any] | None = None, ok: tuple[int, ...] = (200, 201)) -> Any:
        deadline = time.monotonic() + REQUEST_DEADLINE
        for attempt in itertools.count():
            servers = self.fleet.live_servers() or self.fleet.servers
            member = servers[next(self._turn) % len(servers)]
            url = f"http://127.0.0.1:{member.port}/api/v1{path}"
            try:
                answer = httpx.request(method, url, json=body, headers=self.headers, timeout=15)
                if answer.status_code in ok:
                    return answer.json() if answer.content else {}
                if answer.status_code < 500:
                    raise ApiError(f"{method} {path}: {answer.status_code} {answer.text[:300]}")
            except httpx.TransportError:
                pass  # the replica died or the answer was lost: ask another one
            with self.load.lock:
                self.load.retried_requests += 1
            if time.monotonic() > deadline:
                raise ApiError(f"{method} {path}: no replica answered within {REQUEST_DEADLINE:.0f}s")
            time.sleep(min(0.05 * (attempt + 1), 1.0))
        raise AssertionError("unreachable")


def drive(api: Api, shape: str, deadline: float) -> SagaRun:
    """Begin, plan, run, approve, commit: one saga through to a terminal state (or the deadline)."""
    run = SagaRun(shape)
    started = time.monotonic()
    try:
        run.saga_id = api.call("POST", "/sagas/", {"metadata": {"chaos": shape}})["id"]
        base = f"/sagas/{run.saga_id}"
        for key, action, deps in SHAPES[shape]:
            api.call("POST", f"{base}/nodes/", {"action": action, "input": {"n": key}, "key": key, "depends_on": deps})
        _run(api, base)
        while time.monotonic() < deadline:
            saga = api.call("GET", f"{base}/")
            run.status = saga["status"]
            if run.status in TERMINAL:
                break
            if run.status == "ACTIVE":
                _operate(api, base, saga["workflow"]["nodes"], run)
            time.sleep(POLL_SECONDS)
    except ApiError as exc:
        run.error = str(exc)
    run.seconds = time.monotonic() - started
    return run


def _run(api: Api, base: str) -> None:
    # 409: a repeated request whose first answer was lost already ran the saga on to a state that cannot run
    # (rolled back, say); the polling loop reads that state.
    api.call("POST", f"{base}/run/", {"wait_seconds": 0, "max_parallel": 8}, ok=(200, 409))


def _operate(api: Api, base: str, nodes: list[dict[str, Any]], run: SagaRun) -> None:
    """What the operator and the client do for an ACTIVE saga: approve what waits, commit what is complete."""
    waiting = [n for n in nodes if n["status"] == "WAITING_APPROVAL"]
    for node in waiting:
        # 4xx: already decided (a repeated request whose first answer was lost); the next poll sees the truth.
        try:
            api.call("POST", f"{base}/nodes/{node['id']}/approve/", {"reason": "chaos operator"})
            run.approvals += 1
        except ApiError:
            pass
    if waiting:
        _run(api, base)
    elif nodes and all(n["status"] == "COMPLETED" for n in nodes):
        # 4xx: committed already by a repeated request whose answer was lost; the next poll reads COMMITTED.
        with contextlib.suppress(ApiError):
            api.call("POST", f"{base}/commit/", {})


# How one saga of a shape is driven: (its round: 0 for the shape's first saga, then 1, 2, ...; the time to give up)
# -> what happened.
ShapeDriver = Callable[[int, float], SagaRun]


def planned_shapes(api: Api) -> dict[str, ShapeDriver]:
    """The REST-driven shapes of SHAPES."""

    def driver(shape: str) -> ShapeDriver:
        return lambda round_, deadline: drive(api, shape, deadline)

    return {shape: driver(shape) for shape in SHAPES}


class Driver:
    """`concurrency` threads start sagas round-robin over the shapes until `total` or the stop time."""

    def __init__(
        self,
        api: Api,
        shapes: dict[str, ShapeDriver],
        total: int,
        concurrency: int,
        stop_at: float,
        give_up_at: float,
    ) -> None:
        self.api = api
        self.shapes = shapes
        self.total = total
        self.concurrency = concurrency
        self.stop_at = stop_at
        self.give_up_at = give_up_at
        self._next = itertools.count()
        self._threads = [threading.Thread(target=self._loop, daemon=True) for _ in range(concurrency)]

    def start(self) -> Driver:
        for thread in self._threads:
            thread.start()
        return self

    def _loop(self) -> None:
        names = list(self.shapes)
        while time.monotonic() < self.stop_at:
            index = next(self._next)
            if index >= self.total:
                return
            shape = names[index % len(names)]
            run = self.shapes[shape](index // len(names), self.give_up_at)
            with self.api.load.lock:
                self.api.load.runs.append(run)

    def join(self, timeout: float) -> bool:
        end = time.monotonic() + timeout
        for thread in self._threads:
            thread.join(max(0.0, end - time.monotonic()))
        return not any(t.is_alive() for t in self._threads)
