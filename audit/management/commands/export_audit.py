"""`semantic-saga export_audit`: audit events as JSON Lines plus a manifest of every chain's head hash."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from audit.verification import events_for, export_lines, manifest, verify_scope


class Command(BaseCommand):
    help = (
        "Write audit events as JSON Lines (--events FILE) and a manifest of head hashes per chain (--manifest FILE) "
        "to anchor chains in WORM storage; `verify_audit --against MANIFEST` later detects truncation. Refuses to "
        "export a broken chain's head."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--events", type=Path, required=True, help="JSON Lines output file.")
        parser.add_argument("--manifest", type=Path, required=True, help="Manifest output file.")
        parser.add_argument("--tenant", help="Only this tenant's sagas and control-plane chain.")
        parser.add_argument("--saga", help="Only this saga.")

    def handle(self, *args: Any, **options: Any) -> None:
        run = verify_scope(saga=options["saga"], tenant=options["tenant"])
        query = events_for(saga=options["saga"], tenant=options["tenant"])
        if run.broken:
            names = ", ".join(f"{c.saga_id}@{c.failed_sequence}" for c in run.broken[:5])
            raise CommandError(
                f"{len(run.broken)} chain(s) are broken ({names}); run verify_audit and investigate "
                "before anchoring anything."
            )
        written = 0
        with options["events"].open("w", encoding="utf-8") as out:
            for line in export_lines(query):
                out.write(line + "\n")
                written += 1
        document = manifest(run, datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ"))
        options["manifest"].write_text(json.dumps(document, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        self.stdout.write(
            f"exported {written} events of {len(run.chains)} chains to {options['events']}; manifest "
            f"{options['manifest']} (sha256 {document['manifest_sha256'][:16]}...)"
        )
