"""`semantic-saga recover_sagas`: one pass recovers what a killed process left behind."""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.management import call_command

from audit.chain import verify_chain
from sagas.models import Saga, Step
from sagas.states import SagaStatus, StepStatus
from tests.contracts import http_contract, register
from tests.distributed.workers import shared_database_url
from tests.httpserver import RecordingHTTPServer
from tests.sagas.helpers import idempotency_keys, wait_until

ROOT = Path(__file__).resolve().parents[2]

CALLER = """
import django, sys
django.setup()
from governance.identity.principal import local_principal
from sagas import coordinator
actor = local_principal()
saga = coordinator.saga_begin(actor=actor)
print(saga.id, flush=True)
coordinator.saga_step_execute(actor=actor, saga_id=saga.id, action="charge", input={"amount": 5})
"""


@pytest.fixture(autouse=True)
def _committed_db(transactional_db: None) -> None:
    """The killed caller is another process: it must see committed rows."""


def test_immediate_step_of_a_killed_caller_is_compensated_by_one_recovery_pass(downstream: RecordingHTTPServer):
    # given a caller process killed while its step's call is in progress
    register(http_contract("charge", downstream.url))
    downstream.script("/charge", [(200, {"id": "ch_1"}, 60.0)])
    env = {**os.environ, "DATABASE_URL": shared_database_url(), "SAGA_LEASE_SECONDS": "3"}
    caller = subprocess.Popen(
        [sys.executable, "-c", CALLER], cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert caller.stdout is not None
    saga_id = caller.stdout.readline().strip()
    wait_until(lambda: len(downstream.requests_to("/charge")) == 1, what="the call to start")
    caller.send_signal(signal.SIGKILL)
    caller.wait(timeout=30)
    step = Step.objects.get(saga_id=saga_id)
    assert step.status == StepStatus.EXECUTING  # journaled before the call: nothing is lost
    # when recovery passes run (the first ones may come before the 3 s lease has expired)
    out = io.StringIO()

    def recovered() -> bool:
        call_command("recover_sagas", stdout=out)
        return Saga.objects.get(pk=saga_id).status == SagaStatus.ROLLED_BACK

    wait_until(recovered, timeout=30, what="the saga to be rolled back")
    # then the uncertain step was compensated with its stable key, and the command said what it did
    step.refresh_from_db()
    assert step.status == StepStatus.COMPENSATED and step.uncertain_outcome
    assert idempotency_keys(downstream, "/charge/undo") == [f"{step.id}:rollback"]
    assert "steps_recovered=1" in out.getvalue()
    assert verify_chain(saga_id).valid


def test_recover_sagas_with_nothing_to_do_says_so():
    out = io.StringIO()
    call_command("recover_sagas", stdout=out)
    assert "nodes_recovered=0" in out.getvalue() and "errors=0" in out.getvalue()
