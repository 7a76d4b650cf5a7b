"""Two workers never both record a node: the fence token taken at claim time decides whose write counts."""

from __future__ import annotations

from audit.models import AuditEvent
from governance.identity import Principal
from sagas import coordinator, executor
from sagas.coordinator import execution
from sagas.models import Node, Step
from sagas.states import NodeStatus, StepStatus
from tests.contracts import http_contract, register
from tests.httpserver import RecordingHTTPServer


def test_stale_worker_result_is_refused_and_audited(operator: Principal, downstream: RecordingHTTPServer):
    # given a node claimed by a worker that then stalls past its lease
    register(http_contract("charge", downstream.url))
    saga = coordinator.saga_begin(actor=operator)
    node = coordinator.node_plan(actor=operator, saga_id=saga.id, action="charge", input={})
    [stale] = execution._claim_ready(operator, saga.id, 1)
    # crash window injected: the lease expired and the node was handed back to scheduling
    Node.objects.filter(pk=node.pk).update(status=NodeStatus.READY, lease_expires_at=None)
    [fresh] = execution._claim_ready(operator, saga.id, 1)
    assert fresh.fence == stale.fence + 1 and fresh.step_id == stale.step_id
    # when the stale worker finally reports
    verdict = execution._record(stale, executor.Outcome(ok=True, result={"from": "stale"}))
    # then its write is refused, audited, and the node still belongs to the fresh claim
    assert verdict == "stale"
    node.refresh_from_db()
    assert node.status == NodeStatus.EXECUTING and node.fence_token == fresh.fence
    assert AuditEvent.objects.filter(saga_id=saga.id, event_type="STALE_WRITE_REFUSED").count() == 1
    # and the fresh worker's result is recorded
    assert execution._record(fresh, executor.Outcome(ok=True, result={"from": "fresh"})) == "completed"
    assert Step.objects.get(pk=fresh.step_id).result == {"from": "fresh"}
    assert Step.objects.get(pk=fresh.step_id).status == StepStatus.COMPLETED
