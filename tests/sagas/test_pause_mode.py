from __future__ import annotations

import pytest

from governance.identity.principal import Principal
from sagas import coordinator
from sagas.errors import SagaError
from sagas.states import NodeStatus, SagaStatus
from tests.contracts import http_contract, register
from tests.httpserver import RecordingHTTPServer


def test_pause_mode_enters_recovery_then_retry_and_commit(operator: Principal, downstream: RecordingHTTPServer):
    # given a pause-mode action that fails until the downstream is fixed
    register(http_contract("provision", downstream.url, max_attempts=2, failure_mode="pause"))
    downstream.script("/provision", [(500, {}), (500, {})])
    saga = coordinator.saga_begin(actor=operator)
    node = coordinator.node_plan(actor=operator, saga_id=saga.id, action="provision", input={})
    # when the run exhausts its attempts
    report = coordinator.saga_run_ready(actor=operator, saga_id=saga.id)
    # then the saga pauses without compensating anything
    assert report.saga.status == SagaStatus.RECOVERY_REQUIRED
    assert report.saga.error["code"] == "HTTP_ERROR" or report.saga.error["code"]
    assert not [r for r in downstream.requests if r[1].endswith("/undo")]
    with pytest.raises(SagaError) as refused:
        coordinator.saga_commit(actor=operator, saga_id=saga.id)
    assert refused.value.code == "SAGA_NOT_ACTIVE"
    # when the operator retries after the downstream recovered
    coordinator.node_retry(actor=operator, saga_id=saga.id, node_id=node.id)
    report = coordinator.saga_run_ready(actor=operator, saga_id=saga.id)
    saga = coordinator.saga_commit(actor=operator, saga_id=saga.id)
    # then
    node.refresh_from_db()
    assert node.status == NodeStatus.COMPLETED
    assert saga.status == SagaStatus.COMMITTED


def test_uncertain_outcome_requires_force(operator: Principal, downstream: RecordingHTTPServer):
    # given a call that times out after it was sent: its effect is unknown
    contract = http_contract("transfer", downstream.url, max_attempts=1, failure_mode="pause")
    contract["forward"]["timeout_seconds"] = 0.5
    register(contract)
    downstream.script("/transfer", [(200, {}, 2.0)])
    saga = coordinator.saga_begin(actor=operator)
    node = coordinator.node_plan(actor=operator, saga_id=saga.id, action="transfer", input={})
    coordinator.saga_run_ready(actor=operator, saga_id=saga.id)
    node.refresh_from_db()
    assert node.uncertain_outcome is True
    # when / then a plain retry is refused
    with pytest.raises(SagaError) as refused:
        coordinator.node_retry(actor=operator, saga_id=saga.id, node_id=node.id)
    assert refused.value.code == "UNCERTAIN_OUTCOME"
    assert "force=true" in refused.value.message
    # and a forced one is accepted
    node = coordinator.node_retry(actor=operator, saga_id=saga.id, node_id=node.id, force=True)
    assert node.status == NodeStatus.READY
