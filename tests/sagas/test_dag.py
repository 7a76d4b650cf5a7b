from __future__ import annotations

import pytest

from governance.identity.principal import Principal
from sagas import coordinator
from sagas.errors import NotFound, SagaError
from sagas.models import Node
from sagas.states import NodeStatus, SagaStatus
from tests.contracts import http_contract, register
from tests.httpserver import RecordingHTTPServer


def test_nodes_run_in_dependency_waves(operator: Principal, downstream: RecordingHTTPServer):
    # given a diamond: a -> (b, c) -> d
    for name in ("a", "b", "c", "d"):
        register(http_contract(name, downstream.url))
    saga = coordinator.saga_begin(actor=operator)
    coordinator.node_plan(actor=operator, saga_id=saga.id, action="a", input={}, key="a")
    coordinator.node_plan(actor=operator, saga_id=saga.id, action="b", input={}, key="b", depends_on=["a"])
    coordinator.node_plan(actor=operator, saga_id=saga.id, action="c", input={}, key="c", depends_on=["a"])
    d = coordinator.node_plan(actor=operator, saga_id=saga.id, action="d", input={}, key="d", depends_on=["b", "c"])
    assert d.status == NodeStatus.WAITING_DEPENDENCY
    # when
    report = coordinator.saga_run_ready(actor=operator, saga_id=saga.id)
    # then every node completed, a first and d last
    assert report.count("COMPLETED") == 4
    order = [r[1] for r in downstream.requests]
    assert order[0] == "/a" and order[-1] == "/d" and set(order[1:3]) == {"/b", "/c"}
    assert set(Node.objects.filter(saga=saga).values_list("status", flat=True)) == {NodeStatus.COMPLETED}
    assert coordinator.saga_commit(actor=operator, saga_id=saga.id).status == SagaStatus.COMMITTED


def test_independent_ready_nodes_really_run_concurrently(operator: Principal, downstream: RecordingHTTPServer):
    # given three independent nodes whose endpoint answers only once all three calls are in flight together
    downstream.barrier("/together", parties=3, timeout=10)
    register(http_contract("together", downstream.url, max_attempts=1))
    saga = coordinator.saga_begin(actor=operator)
    for i in range(3):
        coordinator.node_plan(actor=operator, saga_id=saga.id, action="together", input={"i": i})
    # when
    report = coordinator.saga_run_ready(actor=operator, saga_id=saga.id, max_parallel=3)
    # then all three met at the barrier (a sequential executor would have broken it)
    assert report.count("COMPLETED") == 3, report.saga.error
    assert report.saga.status == SagaStatus.ACTIVE


def test_max_parallel_bounds_nodes_in_flight(operator: Principal, downstream: RecordingHTTPServer):
    # given four independent nodes and max_parallel=2
    register(http_contract("count", downstream.url))
    saga = coordinator.saga_begin(actor=operator)
    for i in range(4):
        coordinator.node_plan(actor=operator, saga_id=saga.id, action="count", input={"i": i})
    # when
    coordinator.saga_run_ready(actor=operator, saga_id=saga.id, max_parallel=2)
    # then the server never saw more than two at once
    assert downstream.max_in_flight("/count") <= 2
    assert len(downstream.requests) == 4


def test_max_steps_stops_the_run(operator: Principal, downstream: RecordingHTTPServer):
    register(http_contract("step", downstream.url))
    saga = coordinator.saga_begin(actor=operator)
    for i in range(3):
        coordinator.node_plan(actor=operator, saga_id=saga.id, action="step", input={"i": i})
    report = coordinator.saga_run_ready(actor=operator, saga_id=saga.id, max_parallel=1, max_steps=2)
    assert report.steps_started == 2 and report.stopped_because == "max_steps"
    assert Node.objects.filter(saga=saga, status=NodeStatus.READY).count() == 1


def test_replanning_a_key_is_idempotent_and_conflicts_are_refused(operator: Principal, downstream: RecordingHTTPServer):
    register(http_contract("step", downstream.url))
    saga = coordinator.saga_begin(actor=operator)
    first = coordinator.node_plan(actor=operator, saga_id=saga.id, action="step", input={"x": 1}, key="k")
    again = coordinator.node_plan(actor=operator, saga_id=saga.id, action="step", input={"x": 1}, key="k")
    assert again.pk == first.pk
    with pytest.raises(SagaError) as conflict:
        coordinator.node_plan(actor=operator, saga_id=saga.id, action="step", input={"x": 2}, key="k")
    assert conflict.value.code == "NODE_KEY_CONFLICT"


def test_unknown_dependency_is_refused(operator: Principal, downstream: RecordingHTTPServer):
    register(http_contract("step", downstream.url))
    saga = coordinator.saga_begin(actor=operator)
    with pytest.raises(NotFound) as refused:
        coordinator.node_plan(actor=operator, saga_id=saga.id, action="step", input={}, depends_on=["nope"])
    assert refused.value.code == "NODE_NOT_FOUND"
    assert Node.objects.count() == 0


def test_node_failure_in_rollback_mode_unwinds_the_whole_dag(operator: Principal, downstream: RecordingHTTPServer):
    # given a -> b where b fails permanently
    register(http_contract("a", downstream.url))
    register(http_contract("b", downstream.url))
    downstream.script("/b", [(400, {"error": "no"})])
    saga = coordinator.saga_begin(actor=operator)
    coordinator.node_plan(actor=operator, saga_id=saga.id, action="a", input={}, key="a")
    coordinator.node_plan(actor=operator, saga_id=saga.id, action="b", input={}, key="b", depends_on=["a"])
    # when
    report = coordinator.saga_run_ready(actor=operator, saga_id=saga.id)
    # then
    assert report.saga.status == SagaStatus.ROLLED_BACK
    assert [r[1] for r in downstream.requests if r[1].endswith("/undo")] == ["/b/undo", "/a/undo"]
    assert dict(Node.objects.filter(saga=saga).values_list("key", "status")) == {
        "a": NodeStatus.COMPENSATED,
        "b": NodeStatus.COMPENSATED,
    }
