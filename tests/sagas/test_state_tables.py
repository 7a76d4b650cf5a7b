from __future__ import annotations

import pytest
from django.db import transaction

from governance.identity.principal import Principal
from sagas import coordinator
from sagas.states import (
    NODE_TRANSITIONS,
    SAGA_TRANSITIONS,
    STEP_TRANSITIONS,
    TERMINAL_NODE,
    TERMINAL_SAGA,
    TERMINAL_STEP,
    NodeStatus,
    SagaStatus,
    StepStatus,
    can_transition,
)

TABLES = [
    (SAGA_TRANSITIONS, SagaStatus, TERMINAL_SAGA, "saga"),
    (NODE_TRANSITIONS, NodeStatus, TERMINAL_NODE, "node"),
    (STEP_TRANSITIONS, StepStatus, TERMINAL_STEP, "step"),
]


@pytest.mark.parametrize(("table", "statuses", "terminal", "kind"), TABLES)
def test_every_status_has_a_row_and_terminal_states_are_never_left(table, statuses, terminal, kind):
    assert set(table) == set(statuses.values)
    for state in terminal:
        assert table[state] == frozenset()
        for target in statuses.values:
            assert not can_transition(kind, state, target)
    for targets in table.values():
        assert targets <= set(statuses.values)


@pytest.mark.parametrize(("table", "statuses", "terminal", "kind"), TABLES)
def test_can_transition_agrees_with_the_table_for_every_pair(table, statuses, terminal, kind):
    for source in statuses.values:
        for target in statuses.values:
            assert can_transition(kind, source, target) == (target in table[source])


def test_public_coordinator_functions_refuse_to_nest_in_a_transaction(operator: Principal):
    # durable=True: a caller's outer transaction could otherwise hold our commit (and its audit event) hostage
    with pytest.raises(RuntimeError, match="durable"), transaction.atomic():
        coordinator.saga_begin(actor=operator)
