"""A `semantic-saga proxy` process killed (SIGKILL) while a forwarded call is out leaves that call journaled: its
intent (a plain allowed call while no tenant policy is configured) or its step EXECUTING (a call begun ahead, as
every call is while a policy is). Once its lease lapses the recovery sweep makes it visibly uncertain (FAILED,
uncertain_outcome, WORKER_LOST) and pauses the session for an operator. The call is never sent again."""

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
from sagas.models import ProxyCallIntent, Saga, Step
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


@pytest.mark.parametrize("journaled", ["by its intent", "begun ahead"])
def test_a_proxy_killed_mid_call_leaves_the_step_uncertain_and_never_resends_it(tmp_path: Path, journaled: str):
    called = tmp_path / "called.jsonl"
    config = config_file(tmp_path, {"tiny": stdio(TINY, "--journal-tools", "--called-file", str(called))})
    env = {**os.environ, "DATABASE_URL": shared_database_url(), "SAGA_LEASE_SECONDS": LEASE_SECONDS}
    if journaled == "begun ahead":  # a tenant policy (allowing everything) sends every call the long way
        policy = {"schema_version": 1, "revision": "crash", "default_effect": "allow", "tenants": {}}
        (tmp_path / "policy.json").write_text(json.dumps(policy))
        env.update(SAGA_POLICY_MODE="json", SAGA_POLICY_FILE=str(tmp_path / "policy.json"))
    params = StdioServerParameters(
        command=str(BIN / "semantic-saga"), args=["proxy", "--config", str(config)], env=env, cwd=str(ROOT)
    )

    def forwarded() -> bool:
        try:
            out = Step.objects.filter(action="proxy.tiny.hang", status="EXECUTING")
            return called.exists() and (ProxyCallIntent.objects.exists() or out.exists())
        finally:
            connections.close_all()  # polled from a worker thread: leave no connection open in it

    async def scenario() -> None:
        async with Client(stdio_client(params), mode="legacy") as client, anyio.create_task_group() as group:

            async def agent() -> None:
                with pytest.raises(Exception):  # noqa: B017 - the proxy dies under the call: any transport error
                    await client.call_tool("hang", {"job": "nightly"})

            # the first call may come before the proxy handled the handshake's end (then it takes the SDK's path,
            # begun ahead): a warm-up call first, so the hang call is the fast path's
            await client.call_tool("env_has", {"name": "HOME"})
            group.start_soon(agent)
            await anyio.to_thread.run_sync(_poll, forwarded, "the hang call to be journaled and forwarded")
            os.kill(stdio_proxy_pid(config), signal.SIGKILL)  # given: the proxy dies while the call is out

    anyio.run(scenario)

    # journaled before it was sent, and nothing recorded its end
    if journaled == "by its intent":
        intent = ProxyCallIntent.objects.get()
        assert not Step.objects.filter(action="proxy.tiny.hang").exists() and intent.arguments == {"job": "nightly"}
        lapsed = ProxyCallIntent.objects.filter(pk=intent.pk, lease_expires_at__lt=Now())
    else:
        assert Step.objects.get(action="proxy.tiny.hang").status == "EXECUTING"
        lapsed = Step.objects.filter(action="proxy.tiny.hang", lease_expires_at__lt=Now())
    # when the lease lapses and the recovery sweep runs (as a restarted server's sweeper does)
    _poll(lapsed.exists, "the lease to lapse")
    report = sagas_recover()
    # then the step is visibly uncertain and the session waits for an operator
    step = Step.objects.get(action="proxy.tiny.hang")
    assert report.steps_recovered == 1
    assert step.status == "FAILED" and step.uncertain_outcome and step.error["code"] == "WORKER_LOST"
    assert Saga.objects.get(pk=step.saga_id).status == "RECOVERY_REQUIRED"
    # and it was sent exactly once, with the step id as its idempotency key; the sweep never re-sends it
    sends = [json.loads(line) for line in called.read_text().splitlines()]
    assert [send["meta"].get("io.semantic-saga/idempotency_key") for send in sends] == [str(step.id)]
    assert sagas_recover().steps_recovered == 0
