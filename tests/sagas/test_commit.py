from __future__ import annotations

import pytest

from governance.identity.principal import Principal
from sagas import coordinator
from sagas.errors import InvalidInput, SagaError
from sagas.models import Saga
from sagas.states import SagaStatus
from tests.contracts import http_contract, register
from tests.httpserver import RecordingHTTPServer
from tests.sagas.helpers import event_types


def test_commit_is_refused_while_a_planned_node_is_unfinished(operator: Principal, downstream: RecordingHTTPServer):
    # given one completed and one not-yet-run node
    register(http_contract("step", downstream.url))
    saga = coordinator.saga_begin(actor=operator)
    coordinator.node_plan(actor=operator, saga_id=saga.id, action="step", input={"i": 1}, key="one")
    coordinator.saga_run_ready(actor=operator, saga_id=saga.id)
    coordinator.node_plan(actor=operator, saga_id=saga.id, action="step", input={"i": 2}, key="two")
    # when
    with pytest.raises(SagaError) as refused:
        coordinator.saga_commit(actor=operator, saga_id=saga.id)
    # then the refusal names the unfinished node and says what to do
    assert refused.value.code == "UNFINISHED_NODES"
    assert "two (READY)" in refused.value.message and "Run ready steps" in refused.value.message
    saga.refresh_from_db()
    assert saga.status == SagaStatus.ACTIVE
    # and once it ran the commit succeeds, ending the chain with SAGA_COMMITTED
    coordinator.saga_run_ready(actor=operator, saga_id=saga.id)
    assert coordinator.saga_commit(actor=operator, saga_id=saga.id).status == SagaStatus.COMMITTED
    assert event_types(saga.id)[0] == "SAGA_STARTED" and event_types(saga.id)[-1] == "SAGA_COMMITTED"


def test_committed_saga_refuses_new_work(operator: Principal, downstream: RecordingHTTPServer):
    register(http_contract("step", downstream.url))
    saga = coordinator.saga_begin(actor=operator)
    coordinator.saga_commit(actor=operator, saga_id=saga.id)
    with pytest.raises(SagaError) as refused:
        coordinator.saga_step_execute(actor=operator, saga_id=saga.id, action="step", input={})
    assert refused.value.code == "SAGA_NOT_ACTIVE"
    assert downstream.requests == []


def test_checkpoint_is_stored_with_its_data_but_audited_by_name_only(operator: Principal):
    saga = coordinator.saga_begin(actor=operator)
    checkpoint = coordinator.saga_checkpoint(actor=operator, saga_id=saga.id, name="halfway", data={"card": "4242"})
    assert checkpoint.data == {"card": "4242"}
    from audit.models import AuditEvent

    event = AuditEvent.objects.get(saga_id=saga.id, event_type="CHECKPOINT_CREATED")
    assert event.data == {"checkpoint_id": str(checkpoint.id), "name": "halfway"}


def test_caller_cannot_forge_identity_metadata(operator: Principal):
    with pytest.raises(InvalidInput) as refused:
        coordinator.saga_begin(actor=operator, metadata={"_identity": {"principal_id": "root"}, "order": 7})
    assert refused.value.code == "RESERVED_METADATA_KEY" and "'_identity'" in refused.value.message
    assert not Saga.objects.exists()
    saga = coordinator.saga_begin(actor=operator, metadata={"order": 7})
    assert saga.metadata["_identity"]["principal_id"] == "alice"
    assert saga.metadata["order"] == 7


def test_caller_cannot_plant_workflow_state_in_metadata(operator: Principal):
    # `_engine` is the workflow state semantic-saga-mcp's clients read from a saga answer: only the server writes it
    forged = {"version": 1, "nodes": {"n1": {"status": "COMPLETED"}}, "checkpoints": []}
    with pytest.raises(InvalidInput) as refused:
        coordinator.saga_begin(actor=operator, metadata={"_engine": forged})
    assert refused.value.code == "RESERVED_METADATA_KEY" and "'_engine'" in refused.value.message
    assert not Saga.objects.exists()
