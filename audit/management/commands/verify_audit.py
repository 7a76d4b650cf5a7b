"""`semantic-saga verify_audit`: recompute every hash chain (each saga's and each tenant's control-plane chain, or
some of them) and report the first broken event of each."""

from __future__ import annotations

import json
import sys
from datetime import datetime
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from audit.verification import CONTROL_PLANE_CHAIN, SAGA_CHAIN, ChainReport, VerificationRun, compare, verify_scope


class Command(BaseCommand):
    help = (
        "Verify the audit hash chain of every saga and every tenant's control-plane chain (operator changes), or "
        "those of --saga / --tenant / --since: detects modified, deleted, reordered and unlinked events, a "
        "control-plane chain's deleted newest events, and with --against an earlier manifest, truncation. Exits 1 "
        "if any chain is broken."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--saga", help="Only this saga id (or control-plane chain id).")
        parser.add_argument(
            "--tenant", help="Only this tenant's sagas and control-plane chain ('*': the deployment's own chain)."
        )
        parser.add_argument("--since", type=datetime.fromisoformat, help="Only sagas with events since (ISO 8601).")
        parser.add_argument("--against", type=Path, help="An earlier manifest from export_audit: detect truncation.")
        parser.add_argument("--json", action="store_true", help="Print one JSON document instead of a table.")

    def handle(self, *args: Any, **options: Any) -> None:
        progress = self._progress if sys.stderr.isatty() and not options["json"] else None
        run = verify_scope(saga=options["saga"], tenant=options["tenant"], since=options["since"], progress=progress)
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
            "sagas_checked": run.count(SAGA_CHAIN),
            "control_plane_chains_checked": run.count(CONTROL_PLANE_CHAIN),
            "events_checked": run.events,
            "broken": [c.as_dict() for c in broken],
        }

    def _table(self, run: VerificationRun, broken: list[ChainReport]) -> None:
        if sys.stderr.isatty():
            self.stderr.write("")
        self.stdout.write(f"{'sagas checked':<16}{run.count(SAGA_CHAIN)}")
        self.stdout.write(f"{'control chains':<16}{run.count(CONTROL_PLANE_CHAIN)}")
        self.stdout.write(f"{'events checked':<16}{run.events}")
        self.stdout.write(f"{'broken chains':<16}{len(broken)}")
        for chain in broken:
            name = f"saga {chain.saga_id}" if chain.kind == SAGA_CHAIN else f"control-plane chain {chain.saga_id}"
            self.stdout.write(
                f"BROKEN {name} (tenant {chain.tenant_id}) at sequence {chain.failed_sequence}: {chain.reason}"
            )
        if not broken:
            self.stdout.write("all chains verify")
