"""`semantic-saga recover_sagas`: one recovery pass now (or `--loop` to keep sweeping without Celery beat)."""

from __future__ import annotations

import signal
import threading
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from sagas.coordinator import sagas_recover


class Command(BaseCommand):
    help = (
        "Reclaim expired leases (re-run idempotent attempts, fail the rest as uncertain under their failure_mode), "
        "start or resume pending rollbacks, retry due ROLLBACK_FAILED sagas, and re-send lost nudges. "
        "Rollbacks found by a single pass run in this process."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--loop", action="store_true", help="Keep sweeping until SIGTERM or Ctrl-C.")
        parser.add_argument("--interval", type=float, default=5.0, help="Seconds between passes with --loop.")
        parser.add_argument("--batch", type=int, default=100, help="Sagas per category per pass (default 100).")

    def handle(self, *args: Any, **options: Any) -> None:
        if options["batch"] < 1 or options["interval"] <= 0:
            raise CommandError("--batch must be at least 1 and --interval greater than 0.")
        if not options["loop"]:
            self._pass(options["batch"], inline=True)
            return
        stop = threading.Event()
        signal.signal(signal.SIGTERM, lambda *_: stop.set())
        try:
            while not stop.is_set():
                self._pass(options["batch"], inline=False)
                stop.wait(options["interval"])
        except KeyboardInterrupt:
            pass
        self.stdout.write("recovery loop stopped")

    def _pass(self, batch: int, *, inline: bool) -> bool:
        report = sagas_recover(batch=batch, inline_rollbacks=inline)
        self.stdout.write(f"recovery pass: {report.summary()}")
        for error in report.errors:
            self.stderr.write(f"  error: {error}")
        return bool(report.errors)
