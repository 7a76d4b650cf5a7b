"""A registered action whose answer is over SAGA_MAX_ACTION_RESULT_BYTES, seen from the saga: the attempt fails as
RESULT_TOO_LARGE with an uncertain outcome and is not retried, nothing of the answer beyond a bounded receipt is
stored, and the rollback undoes the step instead of skipping it as untouched."""

from __future__ import annotations

import json

from django.test import override_settings

from governance.identity.principal import Principal
from sagas import coordinator
from sagas.models import Saga, Step
from sagas.states import SagaStatus, StepStatus
from tests.contracts import http_contract, register
from tests.httpserver import RecordingHTTPServer

LIMIT = 4096


@override_settings(SAGA_MAX_ACTION_RESULT_BYTES=LIMIT)
def test_an_oversized_answer_fails_the_step_as_uncertain_once_and_stores_only_a_bounded_receipt(
    operator: Principal, downstream: RecordingHTTPServer
):
    register(http_contract("export", downstream.url, max_attempts=3))
    downstream.script("/export", [(200, {"rows": ["x" * 100] * 5000})])  # about 500 KB
    saga = coordinator.saga_begin(actor=operator)
    coordinator.node_plan(actor=operator, saga_id=saga.id, action="export", input={})

    coordinator.saga_run_ready(actor=operator, saga_id=saga.id, wait_seconds=30)

    step = Step.objects.get(saga=saga)
    assert step.error is not None and step.error["code"] == "RESULT_TOO_LARGE"
    assert "SAGA_MAX_ACTION_RESULT_BYTES" in step.error["message"]
    assert step.uncertain_outcome is True and step.error["retryable"] is False
    assert len(downstream.requests_to("/export")) == 1  # not retried, although the contract allows 3 attempts
    assert step.result is None and len(json.dumps(step.error)) < 2 * LIMIT
    # the rollback (failure_mode rollback) does not skip it as untouched, as it would a certain failure: it undoes it
    assert Saga.objects.get(pk=saga.id).status == SagaStatus.ROLLED_BACK
    assert step.status == StepStatus.COMPENSATED and len(downstream.requests_to("/export/undo")) == 1
