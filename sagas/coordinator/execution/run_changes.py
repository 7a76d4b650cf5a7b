"""Wakes a caller waiting for a run (run_ready_steps) in this process as soon as a node of its saga is recorded.

Without it the waiter can only poll, with a back-off that lets a finished wave sit unseen for up to as long as it
took (a wave done at 45 ms was seen at 70). An outcome recorded on this process's threads (the embedded executor,
fan-out threads) bumps its saga's counter after the commit; the waiter wakes, reads the run, and goes back to
waiting if it is not settled. Outcomes recorded in other processes (Celery workers) do not reach it: the waiter's
poll stays the fallback, so a missed or absent signal only costs the old latency, never a wrong answer.
"""

from __future__ import annotations

import threading
import uuid
from collections import Counter


class RunChanges:
    """Per saga, a change counter kept only while someone waits on that saga."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._counts: dict[uuid.UUID, int] = {}
        self._waiters: Counter[uuid.UUID] = Counter()

    def watch(self, saga_id: uuid.UUID) -> int:
        """Start watching (before reading the run): returns the counter to pass to `wait`."""
        with self._changed:
            self._waiters[saga_id] += 1
            return self._counts.setdefault(saga_id, 0)

    def unwatch(self, saga_id: uuid.UUID) -> None:
        with self._changed:
            self._waiters[saga_id] -= 1
            if self._waiters[saga_id] <= 0:
                del self._waiters[saga_id]
                self._counts.pop(saga_id, None)

    def wait(self, saga_id: uuid.UUID, seen: int, timeout: float) -> int:
        """Block until the saga changed since `seen`, or `timeout` seconds; returns the counter now."""
        with self._changed:
            self._changed.wait_for(lambda: self._counts.get(saga_id, 0) != seen, timeout)
            return self._counts.get(saga_id, 0)

    def changed(self, saga_id: uuid.UUID) -> None:
        """A node of this saga was recorded (committed). Costs a lock only when nobody waits on it."""
        with self._changed:
            if saga_id in self._waiters:
                self._counts[saga_id] = self._counts.get(saga_id, 0) + 1
                self._changed.notify_all()


RUN_CHANGES = RunChanges()
