"""`semantic-saga pending`: the proxied calls held for an operator's decision, one a line: its short id first (the
id's last 8 characters, as Sagaz shows them; `approve` and `deny` take it, a unique prefix or the whole id), then the
tool, server, class, the arguments folded, and how long it has waited. `--json` keeps the whole id."""

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
from sagas.selectors.proxy_sessions import held_calls_of_tenant
from sagas.selectors.short_ids import shortest_unique

COLUMNS = [("id", "<"), ("tool", "<"), ("server", "<"), ("class", "<"), ("arguments", "<"), ("waited", ">")]
# Characters of the arguments shown on one line; the whole call is one `semantic-saga ledger` away.
FOLD_CHARS = 60


class Command(BaseCommand):
    help = "List the proxied calls waiting for an operator's decision (approve ID / deny ID), oldest first."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--json", action="store_true", help="One JSON object per held call, one a line (NDJSON).")

    def handle(self, *args: Any, **options: Any) -> None:
        actor = deciding_operator()
        held = held_calls_pending(actor=actor)
        now = timezone.now()
        if options["json"]:
            for call in held:
                row = {
                    "id": call.call_id,
                    "short_id": shortest_unique(held_calls_of_tenant(actor), call.call_id),
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
        every = held_calls_of_tenant(actor)
        rows = [
            [
                shortest_unique(every, c.call_id),
                _tool(c),
                c.server,
                c.effect_class,
                fold(c.arguments),
                waited(now - c.requested_at),
            ]
            for c in held
        ]
        paint = Paint.for_stream(self.stdout)
        self.stdout.write(
            table(COLUMNS, rows, paint, lambda index, cell: CLASS_STYLES.get(cell) if index == 3 else None)
        )
        self.stdout.write(f"{len(held)} call(s) held: semantic-saga approve ID | semantic-saga deny ID")


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
