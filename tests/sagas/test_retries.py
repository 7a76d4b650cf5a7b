from __future__ import annotations

import pytest

from governance.identity.principal import Principal
from sagas import coordinator
from sagas.errors import ActionFailedPermanent
from sagas.models import Node, Step
from sagas.states import NodeStatus, SagaStatus, StepStatus
from tests.contracts import http_contract, register
from tests.httpserver import RecordingHTTPServer
from tests.sagas.helpers import event_types, idempotency_keys


def test_forward_retries_reuse_one_step_id(operator: Principal, downstream: RecordingHTTPServer):
    # given an action that fails twice with a transient error
    register(http_contract("charge", downstream.url, max_attempts=3))
    downstream.script("/charge", [(503, {}), (503, {}), (200, {"id": "ch_1"})])
    saga = coordinator.saga_begin(actor=operator)
    # when
    step = coordinator.saga_step_execute(actor=operator, saga_id=saga.id, action="charge", input={"amount": 5})
    # then every attempt carried the same idempotency key: the one step id
    assert step.status == StepStatus.COMPLETED
    assert step.attempts == 3
    assert idempotency_keys(downstream, "/charge") == [str(step.id)] * 3
    assert Step.objects.filter(saga=saga).count() == 1
    assert step.result == {"id": "ch_1"}


def test_node_retries_reuse_step_id_across_waves(operator: Principal, downstream: RecordingHTTPServer):
    # given a planned node whose first two calls fail transiently
    register(http_contract("charge", downstream.url, max_attempts=3))
    downstream.script("/charge", [(500, {}), (502, {}), (200, {"ok": True})])
    saga = coordinator.saga_begin(actor=operator)
    node = coordinator.node_plan(actor=operator, saga_id=saga.id, action="charge", input={})
    # when
    report = coordinator.saga_run_ready(actor=operator, saga_id=saga.id)
    # then
    node.refresh_from_db()
    assert node.status == NodeStatus.COMPLETED
    assert report.count("COMPLETED") == 1 and report.steps_started == 3
    assert idempotency_keys(downstream, "/charge") == [str(node.step_id)] * 3
    assert event_types(saga.id).count("STEP_RETRY_SCHEDULED") == 2


def test_non_retryable_failure_is_not_retried(operator: Principal, downstream: RecordingHTTPServer):
    # given a 4xx answer, which retrying cannot fix
    register(http_contract("charge", downstream.url, max_attempts=5, failure_mode="pause"))
    downstream.script("/charge", [(422, {"error": "bad card"})])
    saga = coordinator.saga_begin(actor=operator)
    # when
    with pytest.raises(ActionFailedPermanent) as failure:
        coordinator.saga_step_execute(actor=operator, saga_id=saga.id, action="charge", input={})
    # then one call, the receipt kept, and the pause failure mode applied
    assert len(downstream.requests) == 1
    assert failure.value.extra["saga_status"] == SagaStatus.RECOVERY_REQUIRED
    step = Step.objects.get(saga=saga)
    assert step.status == StepStatus.FAILED and step.attempts == 1


def test_exhausted_node_retries_block_dependants(operator: Principal, downstream: RecordingHTTPServer):
    # given a -> b, where a always fails, in pause mode
    register(http_contract("flaky", downstream.url, max_attempts=2, failure_mode="pause"))
    register(http_contract("after", downstream.url))
    downstream.script("/flaky", [(500, {})] * 2)
    saga = coordinator.saga_begin(actor=operator)
    a = coordinator.node_plan(actor=operator, saga_id=saga.id, action="flaky", input={}, key="a")
    coordinator.node_plan(actor=operator, saga_id=saga.id, action="after", input={}, key="b", depends_on=["a"])
    # when
    report = coordinator.saga_run_ready(actor=operator, saga_id=saga.id)
    # then
    assert report.saga.status == SagaStatus.RECOVERY_REQUIRED
    statuses = dict(Node.objects.filter(saga=saga).values_list("key", "status"))
    assert statuses == {"a": NodeStatus.FAILED, "b": NodeStatus.BLOCKED}
    a.refresh_from_db()
    assert a.attempts == 2
