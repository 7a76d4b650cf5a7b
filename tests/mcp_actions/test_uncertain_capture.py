"""A captured pre-state survives a lost answer: a retry reuses it instead of reading the (already changed) state
again, and an uncertain step's rollback restores it even though the forward answer never arrived."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from typing import Any

import pytest

from governance.identity.principal import Principal
from sagas import coordinator
from sagas.models import Step
from sagas.states import SagaStatus, StepStatus
from tests.contracts import register
from tests.mcp_actions.conftest import DemoWorld, http_server, mcp_contract

# The forward call's answer arrives after the client gave up (timeout 1 s): the update applied, the answer is lost.
STALL_SECONDS = 2.0


@pytest.fixture(autouse=True)
def _committed_db(transactional_db: None) -> None:
    """Executor threads run the steps: test rows must be committed."""


@pytest.fixture
def first_update_stalls(crm: DemoWorld, monkeypatch: pytest.MonkeyPatch) -> None:
    """The first update_contact applies, then holds its answer past the client's timeout (later ones answer)."""
    original = crm.world.open
    stalled: list[bool] = []

    @contextlib.contextmanager
    def open_world() -> Iterator[dict[str, Any]]:
        with original() as data:
            yield data
            last = data["calls"][-1]["tool"] if data["calls"] else ""
        if last == "update_contact" and not stalled:
            stalled.append(True)
            time.sleep(STALL_SECONDS)

    monkeypatch.setattr(crm.world, "open", open_world)


def _rename(crm: DemoWorld, *, idempotent: bool, max_attempts: int) -> None:
    contract = mcp_contract(
        "rename_contact",
        http_server(crm.url),
        {"tool": "update_contact", "arguments": {"id": "${input.id}", "name": "${input.name}"}, "timeout_seconds": 1},
        capture={"tool": "get_contact", "arguments": {"id": "${input.id}"}},
        compensation={
            "tool": "update_contact",
            "arguments": {"id": "${input.id}", "name": "${pre_state.name}", "email": "${pre_state.email}"},
        },
        reversibility="reversible",
        idempotent=idempotent,
        max_attempts=max_attempts,
    )
    register(contract)


def _renaming_saga(operator: Principal, crm: DemoWorld, *, idempotent: bool, max_attempts: int) -> tuple[Any, Any]:
    """An existing contact, and a saga that renames it (run: its first answer is lost)."""
    before = crm.call_tool("create_contact", {"name": "Ada Lovelace", "email": "ada@example.com"})
    _rename(crm, idempotent=idempotent, max_attempts=max_attempts)
    saga = coordinator.saga_begin(actor=operator)
    coordinator.node_plan(
        actor=operator, saga_id=saga.id, action="rename_contact", input={"id": before["id"], "name": "Ada King"}
    )
    coordinator.saga_run_ready(actor=operator, saga_id=saga.id, wait_seconds=30)
    return before, saga


def test_an_uncertain_renaming_is_rolled_back_to_the_captured_name(
    operator: Principal, crm: DemoWorld, first_update_stalls: None
) -> None:
    # when the rename's answer is lost (uncertain, not retried) and the saga rolls back (failure_mode rollback)
    before, saga = _renaming_saga(operator, crm, idempotent=False, max_attempts=1)
    # then the inverse ran from the kept pre-state: the contact has its old name again
    saga.refresh_from_db()
    step = Step.objects.get(saga=saga)
    assert step.uncertain_outcome and step.status == StepStatus.COMPENSATED, (step.status, step.error)
    assert saga.status == SagaStatus.ROLLED_BACK
    assert crm.state()["contacts"][before["id"]] == before


def test_a_retry_reuses_the_first_capture_instead_of_reading_the_changed_state(
    operator: Principal, crm: DemoWorld, first_update_stalls: None
) -> None:
    # when the first attempt's answer is lost and the idempotent rename is retried
    before, saga = _renaming_saga(operator, crm, idempotent=True, max_attempts=2)
    step = Step.objects.get(saga=saga)
    assert step.status == StepStatus.COMPLETED and step.attempts == 2, (step.status, step.error)
    # then the state was captured once, before the first attempt, and the receipt keeps that original state
    assert len(crm.calls("get_contact")) == 1 and step.result["pre_state"] == before
    # and a rollback restores the original name, not the renamed one
    assert coordinator.saga_rollback(actor=operator, saga_id=saga.id).status == SagaStatus.ROLLED_BACK
    assert crm.state()["contacts"][before["id"]] == before
