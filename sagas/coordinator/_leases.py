"""Leases and heartbeats on the units that execute: node attempts, immediate steps and a saga's rollback runner.

A lease is (lease_owner, lease_expires_at, fence_token) on the row. Taking it increments the fence token in the
same conditional UPDATE; every completion write is conditioned on that token, so a worker that lost its lease
can never record an outcome. Deadlines are computed by the database (now() + ttl), so all processes compare
leases against one clock.

While an action runs outside any transaction, the coordinator keeps its lease alive (`heartbeat`): one daemon
thread per process (not a thread per attempt) renews every lease it holds every ttl/3. A renewal is a coordinator
write like any other, conditioned on the row: it only touches a row whose fence token and owner still match, so a
worker that lost its lease cannot extend someone else's.
"""

from __future__ import annotations

import logging
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import connections

from sagas.coordinator.sql.rows import FromNow
from sagas.models import Node, ProxyCallIntent, Saga, Step

logger = logging.getLogger("sagas.coordinator._leases")

_PROCESS_WORKER_ID = f"{socket.gethostname()}:{uuid.uuid4().hex[:8]}"


# What a row's lease fields become when its holder lets go of it (an outcome recorded, a retry scheduled, a held call
# handed back): no owner, no deadline. One constant, so a release never forgets one of the two.
RELEASED: dict[str, Any] = {"lease_owner": "", "lease_expires_at": None}


def worker_id() -> str:
    return settings.SAGA_WORKER_ID or _PROCESS_WORKER_ID


def lease_seconds() -> float:
    return float(settings.SAGA_LEASE_SECONDS)


def seconds_from_now(seconds: float) -> FromNow:
    """The database's now() + seconds, for lease deadlines and retry times."""
    return FromNow(seconds)


def lease_deadline() -> FromNow:
    return seconds_from_now(lease_seconds())


@dataclass(frozen=True)
class LeaseRef:
    model: type[Node] | type[Saga] | type[Step] | type[ProxyCallIntent]
    pk: uuid.UUID
    fence: int


class _Keeper:
    def __init__(self) -> None:
        self._leases: dict[int, LeaseRef] = {}
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._next_id = 0

    def add(self, ref: LeaseRef) -> int:
        with self._lock:
            self._next_id += 1
            self._leases[self._next_id] = ref
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="saga-lease-keeper", daemon=True)
                self._thread.start()
            return self._next_id

    def remove(self, handle: int) -> None:
        with self._lock:
            self._leases.pop(handle, None)

    def _run(self) -> None:
        while True:
            time.sleep(max(0.5, lease_seconds() / 3))
            with self._lock:
                refs = list(self._leases.values())
            if refs:
                self._renew(refs)

    def _renew(self, refs: list[LeaseRef]) -> None:
        try:
            for ref in refs:
                self._renew_one(ref)
        except Exception:  # a missed renewal is survivable (the next one retries); a dead keeper is not
            logger.exception("lease renewal failed leases=%d", len(refs))
        finally:
            connections.close_all()

    @staticmethod
    def _renew_one(ref: LeaseRef) -> None:
        owner, deadline = worker_id(), lease_deadline()
        model = ref.model
        if issubclass(model, ProxyCallIntent):
            # A call's intent, and the step another transaction wrote it as meanwhile (its fence is the ref's).
            ProxyCallIntent.objects.filter(pk=ref.pk, lease_owner=owner).update(lease_expires_at=deadline)
            Step.objects.filter(pk=ref.pk, fence_token=ref.fence, lease_owner=owner).update(lease_expires_at=deadline)
            return
        model.objects.filter(pk=ref.pk, fence_token=ref.fence, lease_owner=owner).update(lease_expires_at=deadline)


_keeper = _Keeper()


def keep_alive(ref: LeaseRef) -> int:
    """Renew `ref`'s lease from now until `let_go(handle)`: for work whose call runs on an event loop rather than in
    this thread (a proxied tools/call, sagas.coordinator.proxy.calls). A process that dies stops renewing."""
    return _keeper.add(ref)


def let_go(handle: int) -> None:
    _keeper.remove(handle)


@contextmanager
def heartbeat(ref: LeaseRef) -> Iterator[None]:
    """Keep `ref`'s lease alive for the duration of the block."""
    handle = _keeper.add(ref)
    try:
        yield
    finally:
        _keeper.remove(handle)
