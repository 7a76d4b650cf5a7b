"""The saga-level operations of the console's buttons, read from the operation table (sagas.operations.table):
each button's confirmation page, and the operation it invokes as the operator (sagas.console.screens.saga serves
them at /admin/sagas/saga/<saga>/do/<operation>/)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from governance.identity.principal import Principal
from sagas.operations.invoke import invoke
from sagas.operations.operation import Button, Operation
from sagas.operations.table import CONSOLE_BUTTONS


@dataclass(frozen=True)
class SagaOperation:
    operation: Operation[Any]
    form: Button

    @property
    def title(self) -> str:
        return self.form.title

    @property
    def explanation(self) -> str:
        return self.form.explanation

    @property
    def button(self) -> str:
        return self.form.button

    @property
    def danger(self) -> bool:
        return self.form.danger

    def perform(self, actor: Principal, saga_id: uuid.UUID) -> str:
        result = invoke(self.operation, actor, {"saga_id": str(saga_id), **self.form.fixed})
        return self.form.report(str(saga_id), result)


SAGA_OPERATIONS: dict[str, SagaOperation] = {
    slug: SagaOperation(operation, form) for slug, (operation, form) in CONSOLE_BUTTONS.items()
}


def run_ready(actor: Principal, saga_id: uuid.UUID) -> str:
    return SAGA_OPERATIONS["run"].perform(actor, saga_id)
