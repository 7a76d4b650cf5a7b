"""`semantic-saga undo [SESSION|last] [--to CHECKPOINT] [--dry-run] [--force] [--reason TEXT] [--json]`: walk a
proxy session newest-first and undo what can be undone (sagas.coordinator.proxy.undo, through the operation table's
proxy_session_undo): R runs its inverse, C is listed for an operator's decision, I as having no way back, reads are
skipped. The last line says how the session ended, as every surface does (sagas.selectors.undo_outcome).

Exit status: 0 everything undone (or a dry run); 1 the undo stopped: an inverse failed or was refused for drift
(the session is ROLLBACK_FAILED); 3 undone, with calls left in the world (listed for a person, or built on by a call
with no way back); 130 (Ctrl-C) or 143 (SIGTERM) interrupted part-way between two calls (run undo again: it resumes
where it stopped). On a terminal, a long undo shows its progress on stderr."""

from __future__ import annotations

import json
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from governance.identity.principal import UNATTENDED_CLI
from sagas.coordinator._undo_walk import UndoWatch, watching
from sagas.management.proxy_cli import SESSION_HELP, operator, refusals, session
from sagas.management.terminal import CLASS_STYLES, Paint, table
from sagas.operations.invoke import invoke
from sagas.operations.table import OPERATIONS
from sagas.selectors.proxy_text import UNDO_VERDICTS, undo_cells, undo_heading, undo_label, undo_summary
from sagas.selectors.undo_plan import UndoItem

# Exit statuses (module docstring).
EXIT_STOPPED = 1
EXIT_CALLS_LEFT = 3
EXIT_BY_SIGNAL = {signal.SIGINT: 130, signal.SIGTERM: 143}
# Progress is shown for undos of at least this many calls, on a terminal only.
PROGRESS_FROM_CALLS = 10

COLUMNS = [("seq", ">"), ("tool", "<"), ("server", "<"), ("class", "<"), ("undo", "<"), ("what", "<")]


class Command(BaseCommand):
    help = "Undo a proxy session (the newest by default), newest call first; --dry-run shows what would happen."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("session", nargs="?", default="last", help=SESSION_HELP)
        parser.add_argument("--to", default="", metavar="CHECKPOINT", help="Undo only what came after it.")
        parser.add_argument("--dry-run", action="store_true", help="Decide and check for drift; change nothing.")
        parser.add_argument("--force", action="store_true", help="Run inverses even where the state has drifted.")
        parser.add_argument(
            "--reason", default="", help="Why (kept with the session's undo requests; the console asks it for --force)."
        )
        parser.add_argument("--json", action="store_true", help="The report as one JSON object.")

    def handle(self, *args: Any, **options: Any) -> None:
        # Without a terminal nobody is known to be there: the undo runs, but an inverse gated `confirm` waits for a
        # person (as the agent's own rollback leaves it), since a script or an agent's shell may be the one asking.
        actor = operator() if sys.stdin.isatty() else replace(operator(), protocol=UNATTENDED_CLI)
        saga = session(actor, options["session"])
        arguments = {
            "saga_id": str(saga.id),
            "to_checkpoint": options["to"],
            "dry_run": options["dry_run"],
            "force": options["force"],
            "reason": options["reason"],
        }
        with refusals(), _interruptible() as caught, watching(UndoWatch(self._progress(), caught.is_set)):
            report = invoke(OPERATIONS["proxy_session_undo"], actor, arguments)
        if options["json"]:
            self.stdout.write(json.dumps(report, sort_keys=True))
        else:
            self._show(report, Paint.for_stream(self.stdout))
        state = (report.get("outcome") or {}).get("state", "")
        if state == "undo_interrupted" and caught.signal is not None:
            sys.exit(EXIT_BY_SIGNAL[caught.signal])
        if state in ("undo_stopped", "undo_interrupted"):
            sys.exit(EXIT_STOPPED)
        if state == "undone_with_calls_left":
            sys.exit(EXIT_CALLS_LEFT)

    def _progress(self) -> Any:
        """Progress on stderr when it is a terminal: one line rewritten in place."""
        if not self.stderr.isatty():
            return None

        def show(done: int, total: int, item: UndoItem) -> None:
            if total < PROGRESS_FROM_CALLS:
                return
            line = f"undoing {done}/{total}: {item.tool} {undo_label(item.verdict)}"
            self.stderr.write(f"\r{line[:100]:<100}", ending="\n" if done == total else "")
            self.stderr.flush()

        return show

    def _show(self, report: dict[str, Any], paint: Paint) -> None:
        self.stdout.write(paint(f"undo session {report['saga_id']}", "bold") + undo_heading(report))
        self.stdout.write(table(COLUMNS, [undo_cells(item) for item in report["items"]], paint, _style))
        self.stdout.write(undo_summary(report))


def _style(column: int, cell: str) -> str | None:
    if column == 3:
        return CLASS_STYLES.get(cell)
    if column == 4:
        return next((style for label, style in UNDO_VERDICTS.values() if label == cell), None)
    return None


class _Caught(threading.Event):
    signal: signal.Signals | None = None


@contextmanager
def _interruptible() -> Iterator[_Caught]:
    """Ctrl-C or SIGTERM asks the walk to stop between two calls (the call in flight finishes and is recorded); a
    second one stops at once, as the signal's default would."""
    caught = _Caught()
    if threading.current_thread() is not threading.main_thread():
        yield caught  # signal handlers live on the main thread only (a test calling the command from another)
        return

    def ask_to_stop(signum: int, _frame: Any) -> None:
        if caught.is_set():  # asked twice: stop now; the call in flight is resumed with its key by the next undo
            sys.stderr.write("undo stopped at once; run undo again to resume (the session stays ROLLING_BACK)\n")
            raise SystemExit(EXIT_BY_SIGNAL[signal.Signals(signum)])
        caught.signal = signal.Signals(signum)
        caught.set()

    previous = {signum: signal.signal(signum, ask_to_stop) for signum in EXIT_BY_SIGNAL}
    try:
        yield caught
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
