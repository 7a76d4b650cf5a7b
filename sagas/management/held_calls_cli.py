"""What `semantic-saga pending`, `approve` and `deny` share: the operator deciding (the local operator of
SAGA_DEFAULT_TENANT, named by `--by`), and a held call's decision through the operation table's approve_saga_step,
exactly as the console and REST decide."""

from __future__ import annotations

import dataclasses
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from governance.errors import ServiceError
from governance.identity.principal import Principal, local_principal
from sagas.operations.invoke import invoke
from sagas.operations.table import OPERATIONS
from sagas.selectors import held_call_node

DEFAULT_DECIDER = "local-operator"


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
        actor = deciding_operator(options["by"])
        try:
            node = held_call_node(actor=actor, call_id=options["call_id"])
            arguments = {"saga_id": str(node.saga_id), "node_id": str(node.id), "approved": self.approved}
            invoke(OPERATIONS["approve_saga_step"], actor, {**arguments, "reason": options["reason"]})
        except ServiceError as refused:
            raise CommandError(f"{refused.code}: {refused.message}") from None
        verb = "approved" if self.approved else "denied"
        tool = node.action.removeprefix("proxy.")
        self.stdout.write(f"{verb} {node.id} ({tool}) as {actor.principal_id}")
