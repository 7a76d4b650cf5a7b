"""A saga transaction's row writes may travel with its next read and its COMMIT (sagas.coordinator.sql.pipeline,
PostgreSQL pipeline mode). Whether they do or not, a transaction reads its own writes, a stale compare-and-set fails
the whole transaction as StaleState, and nothing of a failed transaction commits."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection

from audit.models import AuditEvent
from audit.models import EventType as E
from governance.identity.principal import Principal
from sagas import coordinator
from sagas.coordinator._tx import locked_saga
from sagas.coordinator.sql import pipeline as write_behind
from sagas.errors import StaleState
from sagas.models import Node
from sagas.states import NodeStatus
from tests.contracts import http_contract, register
from tests.httpserver import RecordingHTTPServer

pytestmark = pytest.mark.parametrize("pipeline", [True, False], ids=["pipelined", "one-by-one"])


@pytest.fixture(autouse=True)
def _pipeline_setting(settings: Any, pipeline: bool) -> None:
    settings.SAGA_PG_PIPELINE = pipeline


@pytest.fixture
def waiting(operator: Principal, downstream: RecordingHTTPServer) -> Node:
    register(http_contract("charge", downstream.url))
    saga = coordinator.saga_begin(actor=operator)
    return coordinator.node_plan(actor=operator, saga_id=saga.id, action="charge", input={}, approval_required=True)


def test_a_transaction_reads_its_own_queued_writes(operator: Principal, waiting: Node, pipeline: bool) -> None:
    with locked_saga(waiting.saga_id, operator) as tx:
        tx.transition(waiting, NodeStatus.REJECTED, event=E.NODE_FAILED, error={"code": "NO"})
        queued = write_behind.active() is not None
        assert Node.objects.values_list("status", "error").get(pk=waiting.pk) == (NodeStatus.REJECTED, {"code": "NO"})
    assert queued == (pipeline and connection.vendor == "postgresql")
    assert Node.objects.get(pk=waiting.pk).status == NodeStatus.REJECTED


def test_a_stale_compare_and_set_fails_at_the_next_read(operator: Principal, waiting: Node, pipeline: bool) -> None:
    stale = Node.objects.get(pk=waiting.pk)
    events = AuditEvent.objects.filter(saga_id=waiting.saga_id).count()
    with pytest.raises(StaleState) as refused, locked_saga(waiting.saga_id, operator) as tx:
        tx.record(E.CHECKPOINT_CREATED, data={"name": "written before the stale move"})
        Node.objects.filter(pk=waiting.pk).update(status=NodeStatus.BLOCKED)  # another writer, in effect
        tx.transition(stale, NodeStatus.REJECTED, event=E.NODE_FAILED)
        Node.objects.get(pk=waiting.pk)  # queued: the refusal surfaces here at the latest
        raise AssertionError("the stale move was not refused")
    assert f"The node {waiting.pk} is no longer WAITING_APPROVAL" in refused.value.message
    assert Node.objects.get(pk=waiting.pk).status == NodeStatus.WAITING_APPROVAL  # nothing of it committed
    assert AuditEvent.objects.filter(saga_id=waiting.saga_id).count() == events


def test_a_stale_compare_and_set_fails_before_commit(operator: Principal, waiting: Node, pipeline: bool) -> None:
    stale = Node.objects.get(pk=waiting.pk)
    with pytest.raises(StaleState), locked_saga(waiting.saga_id, operator) as tx:
        Node.objects.filter(pk=waiting.pk).update(status=NodeStatus.BLOCKED)
        tx.transition(stale, NodeStatus.REJECTED, event=E.NODE_FAILED)
        tx.update(tx.saga, metadata={"written": "with the commit"})  # queued behind the stale move
    assert Node.objects.get(pk=waiting.pk).status == NodeStatus.WAITING_APPROVAL
    assert "written" not in Node.objects.get(pk=waiting.pk).saga.metadata
