"""`semantic-saga verify_audit`: recompute every saga's hash chain (or some) and report the first broken event."""

from __future__ import annotations

import json
import sys
from datetime import datetime
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from audit.verification import ChainReport, VerificationRun, compare, events_for, verify


class Command(BaseCommand):
    help = (
        "Verify the audit hash chain of every saga (or --saga / --tenant / --since): detects modified, deleted, "
        "reordered and unlinked events, and with --against an earlier manifest, truncation. Exits 1 if any chain "
        "is broken."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--saga", help="Only this saga id.")
        parser.add_argument("--tenant", help="Only this tenant's sagas.")
        parser.add_argument("--since", type=datetime.fromisoformat, help="Only sagas with events since (ISO 8601).")
        parser.add_argument("--against", type=Path, help="An earlier manifest from export_audit: detect truncation.")
        parser.add_argument("--json", action="store_true", help="Print one JSON document instead of a table.")

    def handle(self, *args: Any, **options: Any) -> None:
        query = events_for(saga=options["saga"], tenant=options["tenant"], since=options["since"])
        run = verify(query, progress=self._progress if sys.stderr.isatty() and not options["json"] else None)
        try:
            truncated = compare(run, self._manifest(options["against"])) if options["against"] else []
        except ValueError as exc:
            raise CommandError(f"{options['against']}: {exc}. Use the manifest as it was exported.") from exc
        broken = run.broken + [c for c in truncated if c not in run.broken]
        if options["json"]:
            self.stdout.write(json.dumps(self._document(run, broken), indent=2))
        else:
            self._table(run, broken)
        if broken:
            raise SystemExit(1)

    def _progress(self, events: int) -> None:
        self.stderr.write(f"\rverified {events} events", ending="")

    @staticmethod
    def _manifest(path: Path) -> dict[str, Any]:
        try:
            document: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise CommandError(f"Cannot read the manifest {path}: {exc}") from exc
        return document

    @staticmethod
    def _document(run: VerificationRun, broken: list[ChainReport]) -> dict[str, Any]:
        return {
            "valid": not broken,
            "sagas_checked": len(run.chains),
            "events_checked": run.events,
            "broken": [c.as_dict() for c in broken],
        }

    def _table(self, run: VerificationRun, broken: list[ChainReport]) -> None:
        if sys.stderr.isatty():
            self.stderr.write("")
        self.stdout.write(f"{'sagas checked':<16}{len(run.chains)}")
        self.stdout.write(f"{'events checked':<16}{run.events}")
        self.stdout.write(f"{'broken chains':<16}{len(broken)}")
        for chain in broken:
            self.stdout.write(
                f"BROKEN saga {chain.saga_id} (tenant {chain.tenant_id}) at sequence {chain.failed_sequence}: "
                f"{chain.reason}"
            )
        if not broken:
            self.stdout.write("all chains verify")
