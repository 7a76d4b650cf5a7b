"""The embedded recovery sweeper: a daemon thread running `sagas_recover` every SAGA_SWEEP_INTERVAL_SECONDS.

Used by `semantic-saga serve` when no broker is configured (with a broker, Celery beat runs the same pass).
"""

from __future__ import annotations

import logging
import threading

from django.conf import settings
from django.db import connections

logger = logging.getLogger("sagas.sweeper")


class EmbeddedSweeper:
    def __init__(self, interval: float | None = None) -> None:
        self.interval = float(interval if interval is not None else settings.SAGA_SWEEP_INTERVAL_SECONDS)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="saga-sweeper", daemon=True)

    def start(self) -> EmbeddedSweeper:
        self._thread.start()
        return self

    def stop(self, timeout: float = 10.0) -> None:
        self._stop.set()
        self._thread.join(timeout)

    def _loop(self) -> None:
        from sagas.coordinator import sagas_recover

        while not self._stop.wait(self.interval):
            try:
                sagas_recover()
            except Exception:  # the database may be briefly unreachable; the next pass tries again
                logger.exception("recovery sweep failed; retrying in %.1fs", self.interval)
            finally:
                connections.close_all()
