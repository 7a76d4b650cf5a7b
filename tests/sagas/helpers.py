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
