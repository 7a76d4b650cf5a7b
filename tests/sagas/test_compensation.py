from __future__ import annotations

import pytest

from governance.identity.principal import Principal
from sagas import coordinator
from sagas.errors import ActionFailedPermanent, SagaError
from sagas.models import Step
from sagas.states import SagaStatus, StepStatus
from tests.contracts import http_contract, register
from tests.httpserver import RecordingHTTPServer
from tests.sagas.helpers import calls, event_types, idempotency_keys


def _three_steps(operator: Principal, downstream: RecordingHTTPServer) -> tuple[object, list[Step]]:
    for name in ("reserve", "charge", "ship"):
        register(http_contract(name, downstream.url))
    saga = coordinator.saga_begin(actor=operator, metadata={"order": "42"})
    steps = [
        coordinator.saga_step_execute(actor=operator, saga_id=saga.id, action=name, input={"n": i})
        for i, name in enumerate(("reserve", "charge", "ship"))
    ]
    return saga.id, steps


def test_rollback_compensates_completed_steps_in_reverse_order(operator: Principal, downstream: RecordingHTTPServer):
    # given three completed steps
    saga_id, steps = _three_steps(operator, downstream)
    # when
    saga = coordinator.saga_rollback(actor=operator, saga_id=saga_id)
    # then the undo calls arrive newest first, each keyed "<step id>:rollback"
    assert saga.status == SagaStatus.ROLLED_BACK
    undo_paths = [r[1] for r in downstream.requests if r[1].endswith("/undo")]
    assert undo_paths == ["/ship/undo", "/charge/undo", "/reserve/undo"]
    assert idempotency_keys(downstream, "/ship/undo") == [f"{steps[2].id}:rollback"]
    assert set(Step.objects.filter(saga_id=saga_id).values_list("status", flat=True)) == {StepStatus.COMPENSATED}
    assert event_types(saga_id)[-1] == "ROLLBACK_COMPLETED"


def test_failing_step_is_compensated_together_with_earlier_ones(operator: Principal, downstream: RecordingHTTPServer):
    # given two completed steps and a third whose call fails permanently
    register(http_contract("reserve", downstream.url))
    register(http_contract("charge", downstream.url))
    downstream.script("/charge", [(400, {"error": "card declined"})])
    saga = coordinator.saga_begin(actor=operator)
    coordinator.saga_step_execute(actor=operator, saga_id=saga.id, action="reserve", input={})
    # when
    with pytest.raises(ActionFailedPermanent) as failure:
        coordinator.saga_step_execute(actor=operator, saga_id=saga.id, action="charge", input={})
    # then the failed step and the earlier one are both compensated, newest first
    assert failure.value.extra["saga_status"] == SagaStatus.ROLLED_BACK
    assert "rolled back" in failure.value.message
    assert [r[1] for r in downstream.requests if r[1].endswith("/undo")] == ["/charge/undo", "/reserve/undo"]
    saga.refresh_from_db()
    assert saga.status == SagaStatus.ROLLED_BACK


def test_compensation_retries_are_counted(operator: Principal, downstream: RecordingHTTPServer):
    # given a step whose compensation fails twice with a transient error before succeeding
    register(http_contract("charge", downstream.url, compensation_attempts=5))
    downstream.script("/charge/undo", [(503, {}), (503, {}), (200, {"refunded": True})])
    saga = coordinator.saga_begin(actor=operator)
    step = coordinator.saga_step_execute(actor=operator, saga_id=saga.id, action="charge", input={})
    # when
    coordinator.saga_rollback(actor=operator, saga_id=saga.id)
    # then
    step.refresh_from_db()
    assert step.status == StepStatus.COMPENSATED
    assert step.compensation_attempts == 3
    assert len(calls(downstream, "/charge/undo")) == 3
    assert event_types(saga.id).count("COMPENSATION_ATTEMPT_FAILED") == 2


def test_rollback_continues_past_failed_compensation_and_ends_rollback_failed(
    operator: Principal, downstream: RecordingHTTPServer
):
    # given three steps, the middle one's compensation always fails
    saga_id, _steps = _three_steps(operator, downstream)
    downstream.script("/charge/undo", [(500, {})] * 3)
    # when
    saga = coordinator.saga_rollback(actor=operator, saga_id=saga_id)
    # then the others are still compensated and the failure is listed
    assert saga.status == SagaStatus.ROLLBACK_FAILED
    statuses = {s.action: s.status for s in Step.objects.filter(saga_id=saga_id)}
    assert statuses == {
        "reserve": StepStatus.COMPENSATED,
        "charge": StepStatus.COMPENSATION_FAILED,
        "ship": StepStatus.COMPENSATED,
    }
    assert [f["action"] for f in saga.error["failures"]] == ["charge"]


def test_retrying_a_failed_rollback_never_compensates_a_step_twice(
    operator: Principal, downstream: RecordingHTTPServer
):
    # given a rollback that failed on one step
    saga_id, _ = _three_steps(operator, downstream)
    downstream.script("/charge/undo", [(500, {})] * 3)
    coordinator.saga_rollback(actor=operator, saga_id=saga_id)
    downstream.requests.clear()
    # when the operator fixed the downstream and rolls back again
    saga = coordinator.saga_rollback(actor=operator, saga_id=saga_id)
    # then only the failed compensation is retried
    assert saga.status == SagaStatus.ROLLED_BACK
    assert [r[1] for r in downstream.requests] == ["/charge/undo"]
    # and a rolled-back saga refuses another rollback
    with pytest.raises(SagaError) as refused:
        coordinator.saga_rollback(actor=operator, saga_id=saga_id)
    assert refused.value.code == "ROLLBACK_REFUSED"


def test_committed_saga_refuses_rollback(operator: Principal, downstream: RecordingHTTPServer):
    # given a committed saga
    register(http_contract("charge", downstream.url))
    saga = coordinator.saga_begin(actor=operator)
    coordinator.saga_step_execute(actor=operator, saga_id=saga.id, action="charge", input={})
    coordinator.saga_commit(actor=operator, saga_id=saga.id)
    # when / then
    with pytest.raises(SagaError) as refused:
        coordinator.saga_rollback(actor=operator, saga_id=saga.id)
    assert refused.value.code == "ROLLBACK_REFUSED"
    assert calls(downstream, "/charge/undo") == []
    saga.refresh_from_db()
    assert saga.status == SagaStatus.COMMITTED


def _refund_by_charge_id(downstream: RecordingHTTPServer, **options: object) -> dict[str, object]:
    contract = http_contract("charge", downstream.url, **options)  # type: ignore[arg-type]
    contract["compensation"]["body"] = {"charge_id": "${result.id}"}
    return contract


def test_refused_call_without_receipt_has_nothing_to_compensate(operator: Principal, downstream: RecordingHTTPServer):
    # given a charge the payment service refused outright (no charge id came back)
    register(_refund_by_charge_id(downstream, max_attempts=1))
    downstream.script("/charge", [(402, {"error": "card declined"})])
    saga = coordinator.saga_begin(actor=operator)
    with pytest.raises(ActionFailedPermanent):
        coordinator.saga_step_execute(actor=operator, saga_id=saga.id, action="charge", input={})
    # then the rollback completes without calling a refund it could not address
    saga.refresh_from_db()
    assert saga.status == SagaStatus.ROLLED_BACK
    assert calls(downstream, "/charge/undo") == []
    assert "COMPENSATION_SKIPPED" in event_types(saga.id)


def test_uncertain_call_without_receipt_is_left_for_an_operator(operator: Principal, downstream: RecordingHTTPServer):
    # given a charge whose answer never arrived (timeout): it may have been captured
    contract = _refund_by_charge_id(downstream, max_attempts=1)
    contract["forward"]["timeout_seconds"] = 0.5
    register(contract)
    downstream.script("/charge", [(200, {"id": "ch_1"}, 2.0)])
    saga = coordinator.saga_begin(actor=operator)
    with pytest.raises(ActionFailedPermanent):
        coordinator.saga_step_execute(actor=operator, saga_id=saga.id, action="charge", input={})
    # then the rollback says plainly that a human must reconcile it, naming the idempotency key
    saga.refresh_from_db()
    step = Step.objects.get(saga=saga)
    assert saga.status == SagaStatus.ROLLBACK_FAILED
    assert (
        step.compensation_error["code"] == "NO_RECEIPT_TO_COMPENSATE"
        and str(step.id) in step.compensation_error["message"]
    )
