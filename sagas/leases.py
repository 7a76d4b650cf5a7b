"""Lease heartbeats: while an action runs outside any transaction, its lease is renewed every ttl/3.

One daemon thread serves every in-flight attempt of this process (not a thread per attempt). A renewal only
touches a row whose fence token still matches, so a worker that lost its lease cannot extend someone else's.
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
from datetime import datetime, timedelta

from django.conf import settings
from django.db import connections
from django.utils import timezone

from sagas.models import Node, Saga

logger = logging.getLogger("sagas.leases")

_PROCESS_WORKER_ID = f"{socket.gethostname()}:{uuid.uuid4().hex[:8]}"


def worker_id() -> str:
    return settings.SAGA_WORKER_ID or _PROCESS_WORKER_ID


def lease_seconds() -> int:
    return int(settings.SAGA_LEASE_SECONDS)


def lease_deadline() -> datetime:
    return timezone.now() + timedelta(seconds=lease_seconds())


@dataclass(frozen=True)
class LeaseRef:
    model: type[Node] | type[Saga]
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
            time.sleep(max(1.0, lease_seconds() / 3))
            with self._lock:
                refs = list(self._leases.values())
            if refs:
                self._renew(refs)

    def _renew(self, refs: list[LeaseRef]) -> None:
        try:
            deadline = lease_deadline()
            for ref in refs:
                ref.model.objects.filter(pk=ref.pk, fence_token=ref.fence, lease_owner=worker_id()).update(
                    lease_expires_at=deadline
                )
        except Exception:  # a missed renewal is survivable (the next one retries); a dead keeper is not
            logger.exception("lease renewal failed leases=%d", len(refs))
        finally:
            connections.close_all()


_keeper = _Keeper()


@contextmanager
def heartbeat(ref: LeaseRef) -> Iterator[None]:
    """Keep `ref`'s lease alive for the duration of the block."""
    handle = _keeper.add(ref)
    try:
        yield
    finally:
        _keeper.remove(handle)
