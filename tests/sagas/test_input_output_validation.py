from __future__ import annotations

import pytest

from governance.identity.principal import Principal
from sagas import coordinator
from sagas.errors import ActionFailedPermanent, InvalidInput
from sagas.models import Node, Step
from sagas.states import SagaStatus, StepStatus
from tests.contracts import http_contract, register
from tests.httpserver import RecordingHTTPServer

AMOUNT_SCHEMA = {
    "type": "object",
    "properties": {"amount": {"type": "integer", "minimum": 1}},
    "required": ["amount"],
    "additionalProperties": False,
}


def test_invalid_input_leaves_no_step_and_makes_no_call(operator: Principal, downstream: RecordingHTTPServer):
    # given
    register(http_contract("charge", downstream.url, input_schema=AMOUNT_SCHEMA))
    saga = coordinator.saga_begin(actor=operator)
    # when
    with pytest.raises(InvalidInput) as refused:
        coordinator.saga_step_execute(actor=operator, saga_id=saga.id, action="charge", input={"amount": "ten"})
    # then
    assert "amount" in refused.value.message and "Nothing was written" in refused.value.message
    assert Step.objects.count() == 0
    assert downstream.requests == []


def test_invalid_input_plans_no_node(operator: Principal, downstream: RecordingHTTPServer):
    register(http_contract("charge", downstream.url, input_schema=AMOUNT_SCHEMA))
    saga = coordinator.saga_begin(actor=operator)
    with pytest.raises(InvalidInput):
        coordinator.node_plan(actor=operator, saga_id=saga.id, action="charge", input={"amount": 0, "x": 1})
    assert Node.objects.count() == 0


def test_invalid_output_keeps_receipt_and_triggers_failure_mode(operator: Principal, downstream: RecordingHTTPServer):
    # given an action promising {"id": string} that answers something else
    schema = {"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]}
    register(http_contract("charge", downstream.url, output_schema=schema, max_attempts=3))
    downstream.script("/charge", [(200, {"unexpected": True})])
    saga = coordinator.saga_begin(actor=operator)
    # when
    with pytest.raises(ActionFailedPermanent) as failure:
        coordinator.saga_step_execute(actor=operator, saga_id=saga.id, action="charge", input={})
    # then the answer is the receipt, it was not retried, and the saga rolled back (compensating the step)
    step = Step.objects.get(saga=saga)
    assert step.error["code"] == "OUTPUT_INVALID"
    assert step.result == {"unexpected": True}
    assert step.attempts == 1
    assert step.status == StepStatus.COMPENSATED
    assert failure.value.extra["saga_status"] == SagaStatus.ROLLED_BACK
