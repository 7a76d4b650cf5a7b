"""What `semantic-saga pending`, `approve` and `deny` share: the operator deciding (the local operator of
SAGA_DEFAULT_TENANT, named by `--by`), and a held call's decision through the operation table's approve_saga_step,
exactly as the console and REST decide.

`approve` and `deny` decide only at an interactive terminal: a held call waits for a person, and an agent runs
commands without one (its shell tool has no terminal on standard input). `approve` also shows the call and asks
the person to type `yes`. This keeps an agent from deciding by running the command; it is not a wall against an
agent that can open a pseudo-terminal of its own (docs/proxy.md, "Security", says what is).
"""

from __future__ import annotations

import dataclasses
import json
import sys
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from governance.errors import ServiceError
from governance.identity.principal import Principal, local_principal
from sagas.models import Node
from sagas.operations.invoke import invoke
from sagas.operations.table import OPERATIONS
from sagas.selectors import held_call_node
from sagas.selectors.proxy_sessions import held_call_class

DEFAULT_DECIDER = "local-operator"
# Characters of the arguments shown when asking: the call as it will be sent, folded only when it is very long.
SHOWN_ARGUMENT_CHARS = 2000
NOT_A_TERMINAL = (
    "semantic-saga {verb} decides a held call only at an interactive terminal: a person decides, not a program "
    "(an agent's shell has no terminal). Nothing was decided. Run it yourself in a terminal, or decide in the "
    "console's approval queue (/admin/sagas/saga/approvals/) or over REST with your own token."
)


def deciding_operator(name: str = DEFAULT_DECIDER) -> Principal:
    """The local operator, under the name the decision is recorded with (`--by`)."""
    return dataclasses.replace(
        local_principal(protocol="cli", tenant_id=settings.SAGA_DEFAULT_TENANT), principal_id=name
    )


class DecisionCommand(BaseCommand):
    approved = True

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("call_id", help="The held call's id (the first column of `semantic-saga pending`).")
        parser.add_argument("--by", default=DEFAULT_DECIDER, help="Who decides (recorded with the decision).")
        parser.add_argument("--reason", default=None, help="Why (kept with the decision, never audited).")

    def handle(self, *args: Any, **options: Any) -> None:
        verb = "approve" if self.approved else "deny"
        if not sys.stdin.isatty():
            raise CommandError(NOT_A_TERMINAL.format(verb=verb))
        actor = deciding_operator(options["by"])
        try:
            node = held_call_node(actor=actor, call_id=options["call_id"])
            if self.approved:
                self._confirm(node)
            arguments = {"saga_id": str(node.saga_id), "node_id": str(node.id), "approved": self.approved}
            invoke(OPERATIONS["approve_saga_step"], actor, {**arguments, "reason": options["reason"]})
        except ServiceError as refused:
            raise CommandError(f"{refused.code}: {refused.message}") from None
        done = "approved" if self.approved else "denied"
        self.stdout.write(f"{done} {node.id} ({node.action.removeprefix('proxy.')}) as {actor.principal_id}")

    def _confirm(self, node: Node) -> None:
        """Show what would be sent and ask for `yes`; anything else decides nothing."""
        shown = json.dumps(node.input, ensure_ascii=False, sort_keys=True)
        if len(shown) > SHOWN_ARGUMENT_CHARS:
            shown = shown[:SHOWN_ARGUMENT_CHARS] + f"... ({len(shown)} characters)"
        tool = node.action.removeprefix("proxy.")
        self.stdout.write(f"held call {node.id}: {tool} (class {held_call_class(node)}) with {shown}")
        self.stdout.write("Type yes to approve it (it is then sent as shown): ", ending="")
        self.stdout.flush()
        answer = sys.stdin.readline().strip().lower()
        if answer != "yes":
            raise CommandError(f"Not approved (you typed {answer[:20]!r}, not yes). Nothing was decided.")
