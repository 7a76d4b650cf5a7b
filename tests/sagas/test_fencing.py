"""Two workers never both record a node: the fence token taken at claim time decides whose write counts."""

from __future__ import annotations

from audit.models import AuditEvent
from governance.identity.principal import Principal
from sagas import coordinator
from sagas.models import Node, Step
from sagas.states import NodeStatus, StepStatus
from tests.contracts import http_contract, register
from tests.httpserver import RecordingHTTPServer
from tests.sagas.helpers import idempotency_keys, wait_until


def test_stale_worker_result_is_refused_after_another_took_over(operator: Principal, downstream: RecordingHTTPServer):
    # given an idempotent node whose first call hangs (a worker stalled mid-action)
    register(http_contract("sync", downstream.url, idempotent=True))
    downstream.script("/sync", [(200, {"from": "stale"}, 3.0), (200, {"from": "fresh"})])
    saga = coordinator.saga_begin(actor=operator)
    node = coordinator.node_plan(actor=operator, saga_id=saga.id, action="sync", input={})
    coordinator.saga_run_ready(actor=operator, saga_id=saga.id, wait_seconds=0)
    wait_until(lambda: len(downstream.requests) == 1, what="the first call to start")
    first_fence = Node.objects.get(pk=node.pk).fence_token
    # crash window injected: the stalled worker's lease runs out
    Node.objects.filter(pk=node.pk).update(lease_expires_at="2000-01-01T00:00:00Z")
    # when the sweeper reclaims it and another attempt completes
    report = coordinator.sagas_recover()
    assert report.nodes_recovered == 1
    wait_until(lambda: Node.objects.get(pk=node.pk).status == NodeStatus.COMPLETED, what="the re-run to complete")
    # then the stalled worker's late answer is refused and audited, never recorded
    wait_until(
        lambda: AuditEvent.objects.filter(saga_id=saga.id, event_type="STALE_WRITE_REFUSED").exists(),
        what="the stale write to be refused",
    )
    node.refresh_from_db()
    assert node.fence_token > first_fence + 1
    step = Step.objects.get(pk=node.step_id)
    assert step.status == StepStatus.COMPLETED and step.result == {"from": "fresh"}
    # and both calls carried the one step id: nothing ran twice under different identities
    assert idempotency_keys(downstream, "/sync") == [str(step.id)] * 2
