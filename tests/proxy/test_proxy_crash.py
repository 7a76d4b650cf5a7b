"""A `semantic-saga proxy` process killed (SIGKILL) while a forwarded call is out leaves that call's step journaled
EXECUTING; once its lease lapses the recovery sweep makes it visibly uncertain (FAILED, uncertain_outcome,
WORKER_LOST) and pauses the session for an operator. The call is never sent again."""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path

import anyio
import pytest
from django.db import connections
from django.db.models.functions import Now
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

from sagas.coordinator import sagas_recover
from sagas.models import Saga, Step
from tests.distributed.workers import shared_database_url
from tests.proxy.guardian import stdio_proxy_pid
from tests.proxy.harness import ROOT, TINY, config_file, stdio

pytestmark = pytest.mark.django_db(transaction=True)
BIN = Path(sys.executable).parent
WAIT_SECONDS = 60
LEASE_SECONDS = "3"


def _poll(predicate, what: str) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + WAIT_SECONDS
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def test_a_proxy_killed_mid_call_leaves_the_step_uncertain_and_never_resends_it(tmp_path: Path):
    called = tmp_path / "called.jsonl"
    config = config_file(tmp_path, {"tiny": stdio(TINY, "--journal-tools", "--called-file", str(called))})
    env = {**os.environ, "DATABASE_URL": shared_database_url(), "SAGA_LEASE_SECONDS": LEASE_SECONDS}
    params = StdioServerParameters(
        command=str(BIN / "semantic-saga"), args=["proxy", "--config", str(config)], env=env, cwd=str(ROOT)
    )

    def forwarded() -> bool:
        try:
            return called.exists() and Step.objects.filter(action="proxy.tiny.hang", status="EXECUTING").exists()
        finally:
            connections.close_all()  # polled from a worker thread: leave no connection open in it

    async def scenario() -> None:
        async with Client(stdio_client(params), mode="legacy") as client, anyio.create_task_group() as group:

            async def agent() -> None:
                with pytest.raises(Exception):  # noqa: B017 - the proxy dies under the call: any transport error
                    await client.call_tool("hang", {"job": "nightly"})

            group.start_soon(agent)
            await anyio.to_thread.run_sync(_poll, forwarded, "the hang call to be journaled and forwarded")
            os.kill(stdio_proxy_pid(config), signal.SIGKILL)  # given: the proxy dies while the call is out

    anyio.run(scenario)

    step = Step.objects.get(action="proxy.tiny.hang")
    assert step.status == "EXECUTING"  # journaled before it was sent, and nothing recorded its end
    # when the lease lapses and the recovery sweep runs (as a restarted server's sweeper does)
    _poll(lambda: Step.objects.filter(pk=step.pk, lease_expires_at__lt=Now()).exists(), "the lease to lapse")
    report = sagas_recover()
    # then the step is visibly uncertain and the session waits for an operator
    step.refresh_from_db()
    assert report.steps_recovered == 1
    assert step.status == "FAILED" and step.uncertain_outcome and step.error["code"] == "WORKER_LOST"
    assert Saga.objects.get(pk=step.saga_id).status == "RECOVERY_REQUIRED"
    # and it was sent exactly once, with the step id as its idempotency key; the sweep never re-sends it
    sends = [json.loads(line) for line in called.read_text().splitlines()]
    assert [send["meta"].get("io.semantic-saga/idempotency_key") for send in sends] == [str(step.id)]
    assert sagas_recover().steps_recovered == 0
