"""invoke: validate, authorize, then call the handler; a refusal comes before the handler runs."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from governance.errors import Forbidden
from governance.identity.principal import Principal
from governance.identity.rbac import Capability, capabilities
from sagas.errors import InvalidInput
from sagas.models import Saga
from sagas.operations.invoke import invoke
from sagas.operations.table import OPERATIONS, TABLE
from tests.conftest import make_principal
from tests.operations.arguments import minimal_arguments

# One principal lacking each capability: a viewer cannot execute, an agent cannot decide, a principal without roles
# cannot read.
LACKING = {
    Capability.READ: make_principal("nobody", "acme"),
    Capability.EXECUTE: make_principal("vera", "acme", "viewer"),
    Capability.DECIDE: make_principal("ava", "acme", "agent"),
    Capability.ADMIN: make_principal("alice", "acme", "operator"),
}


def _recording(operation: Any) -> tuple[Any, list[Any]]:
    """The table's operation with a handler that records its calls instead of acting."""
    calls: list[Any] = []

    def handler(actor: Principal, arguments: Any) -> dict[str, Any]:
        calls.append((actor, arguments))
        return {"called": operation.name}

    return dataclasses.replace(operation, handler=handler), calls


@pytest.mark.parametrize("operation", TABLE, ids=lambda op: op.name)
def test_a_principal_without_the_capability_is_refused_before_the_handler_runs(operation: Any):
    # given the operation, and a principal holding every capability but the one it needs
    recorded, calls = _recording(operation)
    principal = LACKING[operation.capability]
    assert operation.capability not in capabilities(principal)
    # when it is invoked with valid arguments: refused, naming the operation and the capability
    with pytest.raises(Forbidden) as refused:
        invoke(recorded, principal, minimal_arguments(operation.arguments))
    assert refused.value.extra == {"operation": operation.verb, "capability": str(operation.capability)}
    assert f"may not {operation.verb.replace('_', ' ')}" in refused.value.message
    # then the handler never ran
    assert calls == []


def test_a_principal_with_the_capability_reaches_the_handler_with_validated_arguments(operator: Principal):
    recorded, calls = _recording(OPERATIONS["run_ready_steps"])
    assert invoke(recorded, operator, {"saga_id": "s", "max_parallel": 2}) == {"called": "run_ready_steps"}
    ((actor, arguments),) = calls
    assert actor is operator and (arguments.saga_id, arguments.max_parallel, arguments.max_steps) == ("s", 2, 100)


def test_invalid_arguments_are_refused_before_authorization_and_name_each_problem():
    # given a viewer (who may not run) sending wrong arguments
    recorded, calls = _recording(OPERATIONS["run_ready_steps"])
    with pytest.raises(InvalidInput) as refused:
        invoke(recorded, LACKING[Capability.EXECUTE], {"saga_id": 7, "colour": "red"})
    # then the arguments are what is reported (an agent fixes them first), and nothing ran
    assert refused.value.code == "INVALID_ARGUMENTS" and calls == []
    assert refused.value.extra["problems"] == [
        "saga_id: Input should be a valid string",
        "colour: Extra inputs are not permitted",
    ]
    assert "run_ready_steps was not called" in refused.value.message


def test_arguments_of_another_operation_are_a_programming_error(operator: Principal):
    commit = OPERATIONS["commit_saga"]
    plan_arguments = OPERATIONS["plan_saga_step"].arguments.model_validate({"saga_id": "s", "action": "a", "input": {}})
    with pytest.raises(TypeError, match="commit_saga takes SagaRef, not PlanArgs"):
        invoke(commit, operator, plan_arguments)


@pytest.mark.parametrize(
    "operation", [op for op in TABLE if op.capability == Capability.EXECUTE], ids=lambda op: op.name
)
def test_the_coordinator_refuses_a_viewer_again_when_a_handler_is_called_directly(operation: Any, db: None):
    # Defence in depth: a caller that skipped invoke still cannot write with a read-only principal.
    arguments = operation.arguments.model_validate(minimal_arguments(operation.arguments))
    with pytest.raises(Forbidden):
        operation.handler(LACKING[Capability.EXECUTE], arguments)
    assert Saga.objects.count() == 0


@pytest.mark.django_db(transaction=True)
def test_begin_answers_exactly_what_get_saga_reads_back(operator: Principal):
    # begin answers from the saga it just created, without reading back its (empty) steps and workflow
    begun = invoke(OPERATIONS["begin_saga"], operator, {"metadata": {"order": "42"}})
    assert begun == invoke(OPERATIONS["get_saga"], operator, {"saga_id": begun["id"]})
