"""`load_actions FILE`: validate a registry file and register its contracts (all or nothing, idempotent).

Each change is recorded in the deployment's control-plane audit chain with the OS account that ran the command
(`cli:<user>`) as its actor; a load that changes nothing records nothing.
"""

from __future__ import annotations

from argparse import ArgumentParser
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from audit.control_plane import cli_actor
from registry.errors import RegistryError
from registry.services import registry_load_file


class Command(BaseCommand):
    help = (
        "Validate every contract in an action registry file, then register them in one transaction: new "
        "versions are created, identical ones left unchanged, an active version replaces the previous active "
        "one. Nothing is written if any contract is invalid. FILE defaults to SAGA_ACTIONS_FILE."
    )

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("file", nargs="?", help="registry JSON file (default: SAGA_ACTIONS_FILE)")

    def handle(self, *args: Any, **options: Any) -> None:
        path = options["file"] or settings.SAGA_ACTIONS_FILE
        if not path:
            raise CommandError("No registry file given: pass FILE or set SAGA_ACTIONS_FILE.")
        try:
            report = registry_load_file(path, actor=cli_actor())
        except RegistryError as exc:
            raise CommandError(f"{exc.code}: {exc.message}") from exc
        self.stdout.write(report.summary())
