"""`semantic-saga checkpoint [SESSION] LABEL`: mark a point in a proxy session (the newest by default) that
`semantic-saga undo --to LABEL` undoes back to. Runs the operation table's checkpoint_saga."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from sagas.management.proxy_cli import SESSION_HELP, operator, refusals, session
from sagas.operations.invoke import invoke
from sagas.operations.table import OPERATIONS


class Command(BaseCommand):
    help = "Mark a checkpoint in a proxy session (the newest by default): `undo --to LABEL` undoes what came after."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("words", nargs="+", metavar="[SESSION] LABEL", help=f"{SESSION_HELP} Then the label.")

    def handle(self, *args: Any, **options: Any) -> None:
        words: list[str] = options["words"]
        if len(words) > 2:
            raise CommandError("Give at most a session and a label: semantic-saga checkpoint [SESSION] LABEL")
        ref, label = (words[0], words[1]) if len(words) == 2 else ("last", words[0])
        actor = operator()
        saga = session(actor, ref)
        with refusals():
            saved = invoke(OPERATIONS["checkpoint_saga"], actor, {"saga_id": str(saga.id), "name": label})
        calls = saga.steps.filter(action__startswith="proxy.").count()
        self.stdout.write(f"checkpoint {saved['name']!r} in session {saga.id}, after {calls} call(s)")
