"""Write-ahead: a step is journaled EXECUTING (and audited) before its action is called, and stays so while the
call is in flight, so a process that dies mid-call leaves a row the recovery sweep can act on."""

from __future__ import annotations

import threading
from typing import Any

from governance.identity.principal import Principal
from sagas import coordinator
from sagas.models import Step
from sagas.states import StepStatus
from tests.contracts import http_contract, register
from tests.httpserver import RecordingHTTPServer
from tests.sagas.helpers import event_types, wait_until

# Long enough to look at the journal while the remote is still "working"; the test polls, it never waits this out.
_HANG_SECONDS = 3.0


def test_step_is_executing_in_the_journal_while_its_call_is_in_flight(
    operator: Principal, downstream: RecordingHTTPServer
):
    # given a remote that takes a while to answer
    register(http_contract("charge", downstream.url))
    downstream.script("/charge", [(200, {"id": "ch_1"}, _HANG_SECONDS)])
    saga = coordinator.saga_begin(actor=operator)
    outcome: dict[str, Any] = {}

    def execute() -> None:
        outcome["step"] = coordinator.saga_step_execute(
            actor=operator, saga_id=saga.id, action="charge", input={"amount": 5}
        )

    worker = threading.Thread(target=execute)
    worker.start()
    try:
        # when the request has reached the remote (the side effect is under way)
        wait_until(lambda: len(downstream.requests_to("/charge")) == 1, what="the forward call")
        # then the journal already holds the step as EXECUTING, keyed by the idempotency key the remote received
        step = Step.objects.get(saga=saga)
        assert step.status == StepStatus.EXECUTING
        assert downstream.requests_to("/charge")[0].headers["Idempotency-Key"] == str(step.id)
        assert "STEP_STARTED" in event_types(saga.id)
        assert "STEP_COMPLETED" not in event_types(saga.id)
    finally:
        worker.join(timeout=30)
    assert outcome["step"].status == StepStatus.COMPLETED
