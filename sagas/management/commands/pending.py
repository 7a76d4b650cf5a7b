"""`semantic-saga pending`: the proxied calls held for an operator's decision, one a line: its id first, then the
tool, server, class, the arguments folded, and how long it has waited."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandParser
from django.utils import timezone

from sagas.management.held_calls_cli import deciding_operator
from sagas.management.terminal import CLASS_STYLES, Paint, table
from sagas.selectors import held_calls_pending

COLUMNS = [("id", "<"), ("tool", "<"), ("server", "<"), ("class", "<"), ("arguments", "<"), ("waited", ">")]
# Characters of the arguments shown on one line; the whole call is one `semantic-saga ledger` away.
FOLD_CHARS = 60


class Command(BaseCommand):
    help = "List the proxied calls waiting for an operator's decision (approve ID / deny ID), oldest first."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--json", action="store_true", help="One JSON object per held call, one a line (NDJSON).")

    def handle(self, *args: Any, **options: Any) -> None:
        held = held_calls_pending(actor=deciding_operator())
        now = timezone.now()
        if options["json"]:
            for call in held:
                row = {
                    "id": call.call_id,
                    "session": call.saga_id,
                    "tool": call.tool,
                    "server": call.server,
                    "class": call.effect_class,
                    "arguments": call.arguments,
                    "definition_changed": call.definition_changed,
                    "waited_seconds": round((now - call.requested_at).total_seconds(), 1),
                }
                self.stdout.write(json.dumps(row, sort_keys=True))
            return
        if not held:
            tenant = settings.SAGA_DEFAULT_TENANT
            self.stdout.write(
                f"No proxied call of tenant {tenant} is waiting for a decision (this command acts in "
                "SAGA_DEFAULT_TENANT; another tenant's held calls are in the console or REST for its operators)."
            )
            return
        rows = [
            [c.call_id, _tool(c), c.server, c.effect_class, fold(c.arguments), waited(now - c.requested_at)]
            for c in held
        ]
        paint = Paint.for_stream(self.stdout)
        self.stdout.write(
            table(COLUMNS, rows, paint, lambda index, cell: CLASS_STYLES.get(cell) if index == 3 else None)
        )


def _tool(call: Any) -> str:
    return f"{call.tool} (definition changed)" if call.definition_changed else call.tool


def fold(arguments: dict[str, Any]) -> str:
    text = json.dumps(arguments, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    return text if len(text) <= FOLD_CHARS else text[: FOLD_CHARS - 1] + "…"


def waited(elapsed: timedelta) -> str:
    seconds = int(elapsed.total_seconds())
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
