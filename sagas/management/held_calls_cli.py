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
import time
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from governance.errors import ServiceError
from governance.identity.principal import Principal, local_principal
from sagas.models import Node
from sagas.selectors import held_call_node
from sagas.selectors.proxy_sessions import held_call_class, held_call_definition

DEFAULT_DECIDER = "local-operator"
# Arguments this short are shown on the call's line; longer ones one per line, each value clipped past
# SHOWN_VALUE_CHARS (saying so), so that no argument is ever out of sight.
INLINE_ARGUMENT_CHARS = 200
SHOWN_VALUE_CHARS = 500
# How long `approve` watches for the proxy holding the call to send it.
FOLLOW_SECONDS = 5.0
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
        parser.add_argument(
            "call_id",
            help="The held call's id as `semantic-saga pending` shows it (its last 8 characters), a unique prefix of "
            "it, or the whole id.",
        )
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
            # The operation table loads the coordinator: imported by a decision, not by `pending` reading this module.
            from sagas.operations.invoke import invoke
            from sagas.operations.table import OPERATIONS

            invoke(OPERATIONS["approve_saga_step"], actor, {**arguments, "reason": options["reason"]})
        except ServiceError as refused:
            raise CommandError(f"{refused.code}: {refused.message}") from None
        done = "approved" if self.approved else "denied"
        self.stdout.write(f"{done} {node.id} ({node.action.removeprefix('proxy.')}) as {actor.principal_id}")
        if self.approved:
            self._followed(node)

    def _confirm(self, node: Node) -> None:
        """Show what would be sent (every argument, each value whole up to a bound that is said), what changed in
        the tool's definition if it did, and ask for `yes`; anything else decides nothing."""
        tool = node.action.removeprefix("proxy.")
        whole = json.dumps(node.input, ensure_ascii=False, sort_keys=True)
        clipped = False
        if len(whole) <= INLINE_ARGUMENT_CHARS:
            self.stdout.write(f"held call {node.id}: {tool} (class {held_call_class(node)}) with {whole}")
        else:
            self.stdout.write(f"held call {node.id}: {tool} (class {held_call_class(node)}) with")
            for key, value in sorted((node.input or {}).items()):
                text = json.dumps(value, ensure_ascii=False, sort_keys=True)
                if len(text) > SHOWN_VALUE_CHARS:
                    text, clipped = (
                        f"{text[:SHOWN_VALUE_CHARS]}... [{len(text) - SHOWN_VALUE_CHARS} more characters]",
                        True,
                    )
                self.stdout.write(f"  {key}: {text}")
        for line in definition_lines(node):
            self.stdout.write(line)
        if clipped:
            self.stdout.write("Some values are clipped above: `semantic-saga pending --json` shows them whole.")
        how = "with these arguments" if clipped else "as shown"
        self.stdout.write(f"Type yes to approve it (it is then sent {how}): ", ending="")
        self.stdout.flush()
        answer = sys.stdin.readline().strip().lower()
        if answer != "yes":
            raise CommandError(f"Not approved (you typed {answer[:20]!r}, not yes). Nothing was decided.")

    def _followed(self, node: Node) -> None:
        """After an approval: whether the proxy holding the call sent it. One that does not within a few seconds may
        have stopped; the call is then withdrawn once its lease lapses, and nothing runs."""
        deadline = time.monotonic() + FOLLOW_SECONDS
        while time.monotonic() < deadline:
            if Node.objects.filter(pk=node.pk, step__isnull=False).exists():
                return
            time.sleep(0.2)
        self.stdout.write(
            f"The proxy holding it has not sent it yet ({FOLLOW_SECONDS:g}s). If that proxy has stopped, the call is "
            "withdrawn once its lease lapses and nothing runs; `semantic-saga ledger` shows what became of it."
        )


def definition_lines(node: Node) -> list[str]:
    """What the approver must know of the tool's definition: that it is not the pinned one, and what changed."""
    facts = held_call_definition(node)
    if not facts.get("definition_changed"):
        return []
    lines = ["Its tool's definition is NOT the one this deployment pinned; what changed:"]
    return lines + [f"  {change}" for change in facts.get("definition_changes") or ("(not recorded)",)]
