"""Recovery: SIGKILL a Celery worker while it holds an EXECUTING node, then time how long until the saga resumes.

The slow action is an HTTP action registered only in the bench database (a fresh version per run), pointing at a
loopback server in this process that holds the first call of each step open (the worker is killed inside it) and
answers any repeat at once. The victim worker runs with a short lease (SAGA_LEASE_SECONDS); this process runs the
embedded sweeper (the same pass as `recover_sagas` and Celery beat) every SWEEP_INTERVAL seconds. Two contracts:
- pause, not idempotent: resumed = the saga is escalated to RECOVERY_REQUIRED (uncertain outcome, for an operator);
- pause, idempotent: resumed = the node is re-run with the same key (the repeat call reaches the server).
Expected: somewhat under one lease (the last heartbeat renewed it at most ttl/3 before the kill) plus up to one
sweep interval.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from bench.common import Child, Children, launch_celery_worker, poll, saga_env, start_celery_worker, wait_celery_ready

LEASE_SECONDS = 5
SWEEP_INTERVAL = 1.0
HOLD_SECONDS = 120.0  # far longer than a trial: the first call is still open when its worker dies


class SlowServer:
    """Holds the first request of each idempotency key open; records when each request arrived."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.arrivals: dict[str, list[float]] = {}
        self._lock = threading.Lock()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                key = str(body.get("step", ""))
                with owner._lock:
                    seen = owner.arrivals.setdefault(key, [])
                    seen.append(time.time())
                    first = len(seen) == 1
                if first:
                    owner.release.wait(HOLD_SECONDS)
                payload = b"{}"
                try:
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                except OSError:  # the caller was the killed worker: nobody is listening any more
                    return

            def log_message(self, format: str, *args: Any) -> None:
                return

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, name="bench-slow", daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self) -> SlowServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()


def _contract(action_id: str, version: str, url: str, idempotent: bool) -> dict[str, Any]:
    return {
        "id": action_id,
        "version": version,
        "kind": "http",
        "semantic": {
            "domain": "diagnostics",
            "operation": "wait",
            "resource": "bench",
            "risk": "low",
            "reversibility": "irreversible",
        },
        "input_schema": {"type": "object"},
        "execution_policy": {
            # The sweep re-runs an idempotent node only while attempts remain: the killed attempt is the first.
            "forward": {"max_attempts": 2 if idempotent else 1, "initial_backoff_seconds": 0, "jitter": 0},
            "failure_mode": "pause",
            "idempotent": idempotent,
        },
        "forward": {
            "url": f"{url}/slow",
            "method": "POST",
            "body": {"step": "${step.id}"},
            "timeout_seconds": HOLD_SECONDS + 30,
        },
    }


@dataclass
class Trial:
    contract: str
    seconds: float
    outcome: str


def launch_victim(children: Children, broker_url: str, name: str) -> Child:
    """A worker on its own Redis database, started early so its start-up overlaps other work; idle until a trial."""
    env = saga_env(CELERY_BROKER_URL=broker_url, SAGA_LEASE_SECONDS=str(LEASE_SECONDS))
    return launch_celery_worker(children, name, "saga_project", env)


def trial(
    children: Children, broker_url: str, server: SlowServer, *, idempotent: bool, version: str, victim: Child
) -> Trial:
    from django.conf import settings

    from governance.identity.principal import local_principal
    from registry.services import action_register
    from sagas import coordinator
    from sagas.models import Node, Saga
    from sagas.sweeper import EmbeddedSweeper

    action_id = "bench_slow_idempotent" if idempotent else "bench_slow"
    action_register(_contract(action_id, version, server.url, idempotent))
    env = saga_env(CELERY_BROKER_URL=broker_url, SAGA_LEASE_SECONDS=str(LEASE_SECONDS))
    wait_celery_ready(victim)
    actor = local_principal()
    saga = coordinator.saga_begin(actor=actor, metadata={"bench": "recovery"})
    node = coordinator.node_plan(actor=actor, saga_id=saga.id, action=action_id, input={}, version=version)
    assert broker_url == settings.CELERY_BROKER_URL, "recovery runs on the Celery executor, on the victim's queue"
    coordinator.saga_run_ready(actor=actor, saga_id=saga.id, wait_seconds=0)
    poll(lambda: any(server.arrivals.values()) and _step_key(node.pk) in server.arrivals, 60, "the slow call")
    key = _step_key(node.pk)
    # The successor starts while the victim holds the call (the only message is already taken), so the re-run
    # is not delayed by a worker's start-up.
    successor = start_celery_worker(children, f"successor-{action_id}", "saga_project", env) if idempotent else None
    victim.kill()
    killed = time.time()
    sweeper = EmbeddedSweeper(interval=SWEEP_INTERVAL).start()
    try:
        if idempotent:
            poll(lambda: len(server.arrivals.get(key, [])) >= 2, LEASE_SECONDS * 10, "the node to be re-run")
            resumed, outcome = server.arrivals[key][1], "re-run with the same key"
            poll(lambda: Node.objects.get(pk=node.pk).status == "COMPLETED", 60, "the re-run to complete")
        else:
            poll(
                lambda: Saga.objects.get(pk=saga.id).status == "RECOVERY_REQUIRED",
                LEASE_SECONDS * 10,
                "the saga to be escalated",
            )
            # When the sweep's commit wrote it, not when this poll noticed.
            resumed = Saga.objects.get(pk=saga.id).updated_at.timestamp()
            outcome = "escalated to RECOVERY_REQUIRED"
    finally:
        sweeper.stop()
        if successor is not None:
            successor.stop()
    return Trial(contract="idempotent" if idempotent else "not idempotent", seconds=resumed - killed, outcome=outcome)


def _step_key(node_pk: Any) -> str:
    from sagas.models import Node

    step_id = Node.objects.filter(pk=node_pk).values_list("step_id", flat=True).first()
    return str(step_id) if step_id else ""
