"""The embedded recovery sweeper: a daemon thread running `sagas_recover` every SAGA_SWEEP_INTERVAL_SECONDS.

Used by `semantic-saga serve` when no broker is configured (with a broker, Celery beat runs the same pass).
"""

from __future__ import annotations

import logging
import threading
import time

from django.conf import settings
from django.db import connections

logger = logging.getLogger("sagas.sweeper")
SLOW_PASS_SECONDS = 5.0


class EmbeddedSweeper:
    def __init__(self, interval: float | None = None) -> None:
        self.interval = float(interval if interval is not None else settings.SAGA_SWEEP_INTERVAL_SECONDS)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="saga-sweeper", daemon=True)
        self.longest_pass_seconds = 0.0  # the slowest pass so far (the chaos suite reports it)

    def start(self) -> EmbeddedSweeper:
        self._thread.start()
        return self

    def stop(self, timeout: float = 10.0) -> None:
        self._stop.set()
        self._thread.join(timeout)

    def _loop(self) -> None:
        from sagas.coordinator import sagas_recover

        while not self._stop.wait(self.interval):
            started = time.monotonic()
            try:
                sagas_recover()
            except Exception:  # the database may be briefly unreachable; the next pass tries again
                logger.exception("recovery sweep failed; retrying in %.1fs", self.interval)
            finally:
                connections.close_all()
                self._timed(time.monotonic() - started)

    def _timed(self, seconds: float) -> None:
        """A pass slow enough to delay recovery beyond a lease is worth a warning: what it waited on is the cause
        of every reclaimed attempt that came late (the database or the broker, usually)."""
        self.longest_pass_seconds = max(self.longest_pass_seconds, seconds)
        if seconds > max(SLOW_PASS_SECONDS, 5 * self.interval):
            logger.warning(
                "recovery sweep pass took %.1fs (interval %.1fs): expired attempts waited that long to be reclaimed; "
                "check the database and broker latency",
                seconds,
                self.interval,
            )
