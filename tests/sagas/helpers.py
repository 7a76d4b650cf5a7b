"""Small readers shared by the coordinator tests."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from audit.models import AuditEvent
from tests.httpserver import RecordingHTTPServer


def calls(server: RecordingHTTPServer, path: str) -> list[Any]:
    return [r for r in server.requests if r[1] == path]


def idempotency_keys(server: RecordingHTTPServer, path: str | None = None) -> list[str]:
    return [r[2].get("Idempotency-Key", "") for r in server.requests if path is None or r[1] == path]


def event_types(saga_id: object) -> list[str]:
    return list(AuditEvent.objects.filter(saga_id=saga_id).order_by("sequence").values_list("event_type", flat=True))


def wait_until(predicate: Callable[[], bool], timeout: float = 20.0, what: str = "condition") -> None:
    """Poll (never a fixed sleep) until `predicate` holds; fail with `what` after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    pause = 0.01
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(pause)
        pause = min(pause * 2, 0.2)


def sagas_with_lost_workers(operator: Any, downstream: RecordingHTTPServer, count: int, hang: float) -> list[Any]:
    """`count` sagas, each with one pause-mode node in flight whose lease has run out (a crash window injected by
    expiring the leases while the calls hang for `hang` seconds)."""
    from sagas import coordinator
    from sagas.models import Node
    from sagas.states import NodeStatus
    from tests.contracts import http_contract, register

    register(http_contract("transfer", downstream.url, failure_mode="pause"))
    downstream.script("/transfer", [(200, {}, hang)] * count)
    sagas = []
    for _ in range(count):
        saga = coordinator.saga_begin(actor=operator)
        coordinator.node_plan(actor=operator, saga_id=saga.id, action="transfer", input={})
        coordinator.saga_run_ready(actor=operator, saga_id=saga.id, wait_seconds=0)
        sagas.append(saga)
    in_flight = Node.objects.filter(status=NodeStatus.EXECUTING)
    wait_until(lambda: in_flight.count() == count, what=f"{count} attempts in flight")
    # Another owner as well as an expired deadline: the workers' lease keeper (still running in this process) renews
    # only leases it owns, so a renewal landing just after this cannot undo the injected crash.
    in_flight.update(lease_expires_at="2000-01-01T00:00:00Z", lease_owner="crashed-worker")
    return sagas
