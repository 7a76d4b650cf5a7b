"""`semantic-saga undo [SESSION|last] [--to CHECKPOINT] [--dry-run] [--force] [--json]`: walk a proxy session
newest-first and undo what can be undone (sagas.coordinator.proxy_undo, through the operation table's
proxy_session_undo): R runs its inverse, C is listed for an operator's decision, I as having no way back, reads are
skipped. Exits 1 when an inverse failed or was refused for drift (the session is then ROLLBACK_FAILED)."""

from __future__ import annotations

import json
import sys
from collections import Counter
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from sagas.management.proxy_cli import SESSION_HELP, operator, refusals, session
from sagas.management.terminal import CLASS_STYLES, Paint, table
from sagas.operations.invoke import invoke
from sagas.operations.table import OPERATIONS

VERDICTS = {
    "undone": ("undone", "green"),
    "would_undo": ("would undo", "green"),
    "needs_decision": ("needs a decision", "yellow"),
    "no_way_back": ("no way back", "red"),
    "cannot_undo": ("cannot undo", "red"),
    "skipped": ("skipped", "dim"),
    "already_undone": ("already undone", "dim"),
    "drifted": ("refused: drift", "red"),
    "failed": ("FAILED", "red+bold"),
    "left": ("left", "yellow"),
}
COLUMNS = [("seq", ">"), ("tool", "<"), ("server", "<"), ("class", "<"), ("undo", "<"), ("what", "<")]


class Command(BaseCommand):
    help = "Undo a proxy session (the newest by default), newest call first; --dry-run shows what would happen."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("session", nargs="?", default="last", help=SESSION_HELP)
        parser.add_argument("--to", default="", metavar="CHECKPOINT", help="Undo only what came after it.")
        parser.add_argument("--dry-run", action="store_true", help="Decide and check for drift; change nothing.")
        parser.add_argument("--force", action="store_true", help="Run inverses even where the state has drifted.")
        parser.add_argument("--json", action="store_true", help="The report as one JSON object.")

    def handle(self, *args: Any, **options: Any) -> None:
        actor = operator()
        saga = session(actor, options["session"])
        arguments = {
            "saga_id": str(saga.id),
            "to_checkpoint": options["to"],
            "dry_run": options["dry_run"],
            "force": options["force"],
        }
        with refusals():
            report = invoke(OPERATIONS["proxy_session_undo"], actor, arguments)
        if options["json"]:
            self.stdout.write(json.dumps(report, sort_keys=True))
        else:
            self._show(report, Paint.for_stream(self.stdout))
        if any(item["verdict"] in ("failed", "drifted") for item in report["items"]) and not report["dry_run"]:
            sys.exit(1)

    def _show(self, report: dict[str, Any], paint: Paint) -> None:
        scope = f" after checkpoint {report['checkpoint']!r}" if report["checkpoint"] else ""
        mode = "dry run: nothing changed; " if report["dry_run"] else ""
        self.stdout.write(paint(f"undo session {report['saga_id']}", "bold") + f"{scope} ({mode}newest first)")
        self.stdout.write(table(COLUMNS, [_cells(item) for item in report["items"]], paint, _style))
        counts = Counter(item["verdict"] for item in report["items"])
        summary = ", ".join(f"{n} {VERDICTS[verdict][0]}" for verdict, n in counts.items())
        self.stdout.write(f"{summary or 'no call to undo'}; the session is {report['status']}")


def _cells(item: dict[str, Any]) -> list[str]:
    what = item["detail"]
    if item["inverse"] and item["verdict"] in ("undone", "would_undo", "drifted", "failed", "left"):
        arguments = ", ".join(f"{key}={_shown(value)}" for key, value in item["inverse"]["arguments"].items())
        what = f"{item['inverse']['tool']}({arguments}): {what}"
    label = VERDICTS.get(item["verdict"], (item["verdict"], None))[0]
    return [str(item["seq"]), item["tool"], item["server"], item["effect_class"], label, what]


def _shown(value: Any) -> str:
    """An argument as JSON (null, objects) unless it is a string, which is shown bare."""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, sort_keys=True)


def _style(column: int, cell: str) -> str | None:
    if column == 3:
        return CLASS_STYLES.get(cell)
    if column == 4:
        return next((style for label, style in VERDICTS.values() if label == cell), None)
    return None
