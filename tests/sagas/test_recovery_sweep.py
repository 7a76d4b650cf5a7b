"""The recovery sweep on the embedded executor: failed rollbacks retried with backoff, bad rows isolated."""

from __future__ import annotations

from audit.models import AuditEvent
from governance.identity.principal import Principal
from sagas import coordinator
from sagas.models import Node, Saga, Step
from sagas.states import NodeStatus, SagaStatus
from tests.contracts import http_contract, register
from tests.httpserver import RecordingHTTPServer
from tests.sagas.helpers import sagas_with_lost_workers, wait_until


def _failed_rollback(operator: Principal, downstream: RecordingHTTPServer, status: int) -> Saga:
    register(http_contract("charge", downstream.url, compensation_attempts=2))
    downstream.script("/charge/undo", [(status, {"error": "refund service down"})] * 2)
    saga = coordinator.saga_begin(actor=operator)
    coordinator.saga_step_execute(actor=operator, saga_id=saga.id, action="charge", input={})
    return coordinator.saga_rollback(actor=operator, saga_id=saga.id)


def test_transient_rollback_failure_is_retried_by_the_sweep_and_stays_visible(
    operator: Principal, downstream: RecordingHTTPServer
):
    # given a rollback that failed on a transient error
    saga = _failed_rollback(operator, downstream, 503)
    saga.refresh_from_db()
    assert saga.status == SagaStatus.ROLLBACK_FAILED and saga.next_recovery_at is not None
    # when the sweep runs before the retry time, nothing happens
    assert coordinator.sagas_recover(inline_rollbacks=True).rollbacks_started == 0
    # when the retry time has come (moved forward instead of waiting 30 s) and the service is back
    Saga.objects.filter(pk=saga.pk).update(next_recovery_at="2000-01-01T00:00:00Z")
    report = coordinator.sagas_recover(inline_rollbacks=True)
    # then the failed compensation was retried and the saga is rolled back
    saga.refresh_from_db()
    assert report.rollbacks_started == 1
    assert saga.status == SagaStatus.ROLLED_BACK and saga.recovery_attempts == 1


def test_permanent_rollback_failure_waits_for_an_operator(operator: Principal, downstream: RecordingHTTPServer):
    saga = _failed_rollback(operator, downstream, 400)
    saga.refresh_from_db()
    assert saga.status == SagaStatus.ROLLBACK_FAILED and saga.next_recovery_at is None
    assert coordinator.sagas_recover(inline_rollbacks=True).rollbacks_started == 0


def test_one_bad_saga_never_stops_the_sweep(operator: Principal, downstream: RecordingHTTPServer):
    # given two sagas whose workers were lost, one of them with a corrupted journal row
    sagas = sagas_with_lost_workers(operator, downstream, 2, hang=3.0)
    Step.objects.filter(saga=sagas[0]).update(action_definition={"execution_policy": {"forward": "not an object"}})
    # when
    report = coordinator.sagas_recover()
    # then the healthy saga was recovered and the bad one reported, not fatal
    assert report.nodes_recovered == 1 and len(report.errors) == 1 and str(sagas[0].id) in report.errors[0]
    assert Saga.objects.get(pk=sagas[1].pk).status == SagaStatus.RECOVERY_REQUIRED
    # (the stalled calls still answer later; wait for them so nothing outlives the test)
    wait_until(lambda: not Node.objects.filter(status=NodeStatus.EXECUTING).exists(), what="both attempts to settle")
    wait_until(
        lambda: AuditEvent.objects.filter(saga_id=sagas[1].id, event_type="STALE_WRITE_REFUSED").exists(),
        what="the recovered saga's late write to be refused",
    )
