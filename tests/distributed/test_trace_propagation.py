"""The caller's trace continues on whichever executor runs the node: in-process threads or Celery workers."""

from __future__ import annotations

from audit import telemetry
from audit.models import AuditEvent
from governance.identity.principal import Principal
from sagas import coordinator
from tests.contracts import http_contract, register
from tests.httpserver import RecordingHTTPServer

TRACE_ID = "0af7651916cd43dd8448eb211c80319c"
TRACEPARENT = f"00-{TRACE_ID}-b7ad6b7169203331-01"


def test_trace_reaches_the_worker_and_the_downstream_request(
    executor_mode: str, operator: Principal, downstream: RecordingHTTPServer
):
    register(http_contract("ship", downstream.url))
    saga = coordinator.saga_begin(actor=operator)
    coordinator.node_plan(actor=operator, saga_id=saga.id, action="ship", input={})
    with telemetry.attached({"traceparent": TRACEPARENT}):
        coordinator.saga_run_ready(actor=operator, saga_id=saga.id, wait_seconds=60)
    started = AuditEvent.objects.get(saga_id=saga.id, event_type="STEP_STARTED")
    assert started.trace_id == TRACE_ID
    assert started.data["worker"]  # written by the executor that ran it (a Celery worker in that mode)
    [request] = downstream.requests_to("/ship")
    assert request[2]["traceparent"].split("-")[1] == TRACE_ID
