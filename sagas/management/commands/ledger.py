"""`semantic-saga ledger [--session ID|last] [--tool T] [--status S] [--json]`: every proxied call of a session,
one a line (seq, tool, server, class, status, duration, result size, id), or one JSON object a line (NDJSON) with
Sagaz's fields and ours (sagas.selectors.proxy_ledger.LedgerRow.as_json; docs/proxy.md names them). A session is
named by its id, a unique prefix or its last characters, or `last`."""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from sagas.management.proxy_cli import SESSION_HELP, operator, refusals, session
from sagas.management.terminal import CLASS_STYLES, STATUS_STYLES, Paint, table
from sagas.selectors.proxy_ledger import LedgerRow, ledger_rows
from sagas.selectors.proxy_text import call_status, milliseconds, size
from sagas.selectors.undo_outcome import undo_outcome

COLUMNS = [
    ("seq", ">"),
    ("tool", "<"),
    ("server", "<"),
    ("class", "<"),
    ("status", "<"),
    ("duration", ">"),
    ("result", ">"),
    ("id", "<"),
]


class Command(BaseCommand):
    help = "Show the proxied calls of a proxy session (the newest by default): one a line, or NDJSON with --json."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--session", default="last", help=SESSION_HELP)
        parser.add_argument("--tool", default="", help="Only the calls of this tool (its name as the agent saw it).")
        parser.add_argument(
            "--status", default="", help="Only calls in this status: completed, failed, refused, dry, compensated, ..."
        )
        parser.add_argument("--json", action="store_true", help="One JSON object per call, one a line (NDJSON).")

    def handle(self, *args: Any, **options: Any) -> None:
        actor = operator()
        saga = session(actor, options["session"])
        with refusals():  # undo plans for the --json line only: the table shows none
            rows = ledger_rows(
                actor=actor, saga=saga, tool=options["tool"], status=options["status"], plans=options["json"]
            )
        if options["json"]:
            for row in rows:
                line = {"session": str(saga.id), "session_id": str(saga.id), **row.as_json()}
                self.stdout.write(json.dumps(line, sort_keys=True))
            return
        paint = Paint.for_stream(self.stdout)
        started = saga.created_at.strftime("%Y-%m-%d %H:%M:%SZ")
        client = saga.metadata.get("proxy", {}).get("client", {}) if isinstance(saga.metadata, dict) else {}
        who = " ".join(str(part) for part in (client.get("name"), client.get("version")) if part)
        preview = ", preview" if saga.preview else ""
        self.stdout.write(paint(f"session {saga.id}", "bold") + f"  ({started}, {who or 'unknown client'}{preview})")
        self.stdout.write(table(COLUMNS, [_cells(row) for row in rows], paint, _style))
        outcome = undo_outcome(saga)
        self.stdout.write(f"{len(rows)} call(s); {outcome.sentence if outcome else 'the session is ' + saga.status}")


def _cells(row: LedgerRow) -> list[str]:
    return [
        str(row.seq) if row.seq else "-",
        row.tool,
        row.server,
        row.effect_class,
        call_status(row),
        milliseconds(row.duration_ms),
        size(row.result_bytes),
        row.id,
    ]


def _style(column: int, cell: str) -> str | None:
    if column == 3:
        return CLASS_STYLES.get(cell)
    if column == 4:
        return STATUS_STYLES.get(cell.split(" ")[0].upper())
    return None
