"""`semantic-saga undo [SESSION|last] [--to CHECKPOINT] [--dry-run] [--force] [--reason TEXT] [--json]`: walk a
proxy session newest-first and undo what can be undone (sagas.coordinator.proxy.undo, through the operation table's
proxy_session_undo): R runs its inverse, C is listed for an operator's decision, I as having no way back, reads are
skipped. Exits 1 when an inverse failed or was refused for drift (the session is then ROLLBACK_FAILED)."""

from __future__ import annotations

import json
import sys
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from sagas.management.proxy_cli import SESSION_HELP, operator, refusals, session
from sagas.management.terminal import CLASS_STYLES, Paint, table
from sagas.operations.invoke import invoke
from sagas.operations.table import OPERATIONS
from sagas.selectors.proxy_text import UNDO_FAILED, UNDO_VERDICTS, undo_cells, undo_heading, undo_summary

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
        actor = operator()
        saga = session(actor, options["session"])
        arguments = {
            "saga_id": str(saga.id),
            "to_checkpoint": options["to"],
            "dry_run": options["dry_run"],
            "force": options["force"],
            "reason": options["reason"],
        }
        with refusals():
            report = invoke(OPERATIONS["proxy_session_undo"], actor, arguments)
        if options["json"]:
            self.stdout.write(json.dumps(report, sort_keys=True))
        else:
            self._show(report, Paint.for_stream(self.stdout))
        if any(item["verdict"] in UNDO_FAILED for item in report["items"]) and not report["dry_run"]:
            sys.exit(1)

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
