"""The same behaviour on the embedded executor and on real Celery workers on Redis."""

from __future__ import annotations

from audit.models import AuditEvent
from governance.identity.principal import Principal
from sagas import coordinator
from sagas.coordinator._leases import worker_id
from sagas.models import Node
from sagas.states import NodeStatus, SagaStatus
from tests.contracts import http_contract, register
from tests.httpserver import RecordingHTTPServer
from tests.sagas.helpers import idempotency_keys


def test_independent_nodes_overlap_and_their_dependant_runs_after_both(
    executor_mode: str, operator: Principal, downstream: RecordingHTTPServer
):
    # given two independent nodes that only answer once both are in flight, and a join after them
    downstream.barrier("/fan", parties=2, timeout=15)
    register(http_contract("fan", downstream.url, max_attempts=1))
    register(http_contract("join", downstream.url))
    saga = coordinator.saga_begin(actor=operator)
    a = coordinator.node_plan(actor=operator, saga_id=saga.id, action="fan", input={"i": 1})
    b = coordinator.node_plan(actor=operator, saga_id=saga.id, action="fan", input={"i": 2})
    coordinator.node_plan(actor=operator, saga_id=saga.id, action="join", input={}, depends_on=[str(a.id), str(b.id)])
    # when
    report = coordinator.saga_run_ready(actor=operator, saga_id=saga.id, max_parallel=4, wait_seconds=60)
    # then both met at the barrier (they overlapped), and the join ran strictly after both answered
    assert report.settled and report.count(NodeStatus.COMPLETED) == 3, (report.as_dict(), report.saga.error)
    assert [r[1] for r in downstream.requests][-1] == "/join"
    assert downstream.max_in_flight("/join") == 1


def test_linear_saga_runs_every_step_in_order(executor_mode: str, operator: Principal, downstream: RecordingHTTPServer):
    register(http_contract("step", downstream.url))
    saga = coordinator.saga_begin(actor=operator)
    previous: list[str] = []
    for i in range(6):
        node = coordinator.node_plan(
            actor=operator, saga_id=saga.id, action="step", input={"i": i}, depends_on=previous
        )
        previous = [str(node.id)]
    report = coordinator.saga_run_ready(actor=operator, saga_id=saga.id, wait_seconds=60)
    assert report.settled and report.count(NodeStatus.COMPLETED) == 6
    assert [r[3]["input"]["i"] for r in downstream.requests] == list(range(6))
    assert coordinator.saga_commit(actor=operator, saga_id=saga.id).status == SagaStatus.COMMITTED


def test_max_parallel_bounds_nodes_in_flight_across_workers(
    executor_mode: str, operator: Principal, downstream: RecordingHTTPServer
):
    register(http_contract("slow", downstream.url))
    downstream.script("/slow", [(200, {}, 0.2)] * 6)
    saga = coordinator.saga_begin(actor=operator)
    for i in range(6):
        coordinator.node_plan(actor=operator, saga_id=saga.id, action="slow", input={"i": i})
    report = coordinator.saga_run_ready(actor=operator, saga_id=saga.id, max_parallel=2, wait_seconds=60)
    assert report.count(NodeStatus.COMPLETED) == 6
    assert downstream.max_in_flight("/slow") <= 2


def test_failure_in_rollback_mode_is_compensated_by_the_executor(
    executor_mode: str, operator: Principal, downstream: RecordingHTTPServer
):
    register(http_contract("reserve", downstream.url))
    register(http_contract("charge", downstream.url, max_attempts=2))
    downstream.script("/charge", [(503, {}), (400, {"error": "declined"})])
    saga = coordinator.saga_begin(actor=operator)
    reserve = coordinator.node_plan(actor=operator, saga_id=saga.id, action="reserve", input={}, key="reserve")
    coordinator.node_plan(
        actor=operator, saga_id=saga.id, action="charge", input={}, key="charge", depends_on=["reserve"]
    )
    report = coordinator.saga_run_ready(actor=operator, saga_id=saga.id, wait_seconds=60)
    assert report.saga.status == SagaStatus.ROLLED_BACK, report.as_dict()
    charge = Node.objects.get(saga=saga, key="charge")
    # the retry reused the step id; both compensations used the stable rollback keys, newest first
    assert idempotency_keys(downstream, "/charge") == [str(charge.step_id)] * 2
    assert [r[1] for r in downstream.requests if r[1].endswith("/undo")] == ["/charge/undo", "/reserve/undo"]
    assert idempotency_keys(downstream, "/reserve/undo") == [f"{Node.objects.get(pk=reserve.pk).step_id}:rollback"]


def test_attempts_run_where_the_executor_lives(
    executor_mode: str, operator: Principal, downstream: RecordingHTTPServer
):
    # given
    register(http_contract("step", downstream.url))
    saga = coordinator.saga_begin(actor=operator)
    coordinator.node_plan(actor=operator, saga_id=saga.id, action="step", input={})
    # when
    coordinator.saga_run_ready(actor=operator, saga_id=saga.id, wait_seconds=60)
    # then the audit trail names the process that ran the attempt: this one, or a Celery worker
    started = AuditEvent.objects.get(saga_id=saga.id, event_type="STEP_STARTED")
    ran_here = started.data["worker"] == worker_id()
    assert ran_here == (executor_mode == "embedded")
