"""A tools/call of class read with gate allow is journaled behind its answer (sagas.protocols.proxy.behind): checked
before it is sent, written after, in the order the session's calls were sent, every line there after a clean stop;
every other call is still journaled before it is sent; a read the check does not clear (a kill switch) is refused
with nothing sent, journaled ahead. The agent is the official mcp client; the downstream is the demo world."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from django.db import connections

from audit.models import AuditEvent
from governance.identity.principal import local_principal
from governance.kill_switch import kill_switch_engage
from sagas.models import Saga, Step
from sagas.protocols.proxy.runtime import journaled
from sagas.selectors import saga_verify_audit
from tests.proxy.agent import connect, text
from tests.proxy.harness import HttpDownstream, config_file, serve_proxy

pytestmark = pytest.mark.django_db(transaction=True)
OPERATOR = local_principal(protocol="test", tenant_id="acme")
READ = "proxy.demo.list_contacts"
WRITE = "proxy.demo.create_contact"


@pytest.fixture(autouse=True)
def _acme(settings: Any) -> None:
    settings.SAGA_DEFAULT_TENANT = "acme"


def _config(tmp_path: Path, demo_http: HttpDownstream) -> Path:
    return config_file(tmp_path, {"demo": {"url": demo_http.url}})


def _steps() -> list[Step]:
    session = Saga.objects.get(metadata__has_key="proxy")
    return list(Step.objects.filter(saga=session).order_by("sequence"))


def test_reads_are_written_after_their_answers_in_order_and_all_there_after_a_clean_stop(
    tmp_path: Path, demo_http: HttpDownstream
):
    # given a journaled proxy; when the agent reads, writes, then reads twice more and disconnects
    with serve_proxy(_config(tmp_path, demo_http), call_path=journaled) as served:

        async def scenario() -> list[dict[str, Any]]:
            async with connect(served.url, "legacy") as client:
                listed = await client.call_tool("list_contacts", {})
                assert not listed.is_error, text(listed)
                created = await client.call_tool("create_contact", {"name": "Ada", "email": "ada@example.com"})
                assert not created.is_error, text(created)
                for _ in range(2):
                    assert not (await client.call_tool("list_contacts", {})).is_error
                log = await client.call_tool("get_call_log", {})
                return list(log.structured_content["calls"])

        calls = anyio.run(scenario)

    # then every call is a step, in the order it was sent, the reads completed with their answers
    steps = _steps()
    assert [s.action for s in steps] == [READ, WRITE, READ, READ, "proxy.demo.get_call_log"]
    assert all(s.status == "COMPLETED" for s in steps)
    assert all(s.action_definition["proxy"]["class"] == "read" for s in steps if s.action != WRITE)
    assert steps[0].result["size_bytes"] > 0 and steps[0].result["duration_ms"] >= 0
    # the write carried its step id, written before it was sent; a read behind its answer carried the id its step
    # was then written under
    write = steps[1]
    assert [c["idempotency_key"] for c in calls if c["tool"] == "create_contact"] == [str(write.id)]
    reads = [str(s.id) for s in steps if s.action == READ]
    assert [c["idempotency_key"] for c in calls if c["tool"] == "list_contacts"] == reads
    started = AuditEvent.objects.get(step_id=str(write.id), event_type="STEP_STARTED")
    completed = AuditEvent.objects.get(step_id=str(write.id), event_type="STEP_COMPLETED")
    assert started.sequence < completed.sequence
    # and the audit chain verifies
    assert saga_verify_audit(actor=OPERATOR, saga_id=write.saga_id)["valid"] is True


def test_a_read_is_in_the_ledger_moments_after_its_answer_while_the_proxy_runs(
    tmp_path: Path, demo_http: HttpDownstream
):
    with serve_proxy(_config(tmp_path, demo_http), call_path=journaled) as served:

        async def scenario() -> None:
            async with connect(served.url, "legacy") as client:
                assert not (await client.call_tool("list_contacts", {})).is_error
                deadline = time.monotonic() + 5
                while not await anyio.to_thread.run_sync(_read_written):
                    assert time.monotonic() < deadline, "the read's step was not written while the proxy was quiet"
                    await anyio.sleep(0.02)

        anyio.run(scenario)


def _read_written() -> bool:
    try:
        return Step.objects.filter(action=READ, status="COMPLETED").exists()
    finally:
        connections.close_all()  # a worker thread's connection would keep the test database from being dropped


def _world_calls(demo_http: HttpDownstream) -> list[dict[str, Any]]:
    world = httpx.get(demo_http.url.removesuffix("/mcp") + "/world", timeout=10).json()
    return list(world["calls"])


def _engage_kill_switch() -> None:
    try:
        kill_switch_engage(actor=OPERATOR, reason="incident 7")
    finally:
        connections.close_all()  # a worker thread's connection would keep the test database from being dropped


def test_a_read_under_a_kill_switch_is_refused_journaled_ahead_and_not_sent(tmp_path: Path, demo_http: HttpDownstream):
    with serve_proxy(_config(tmp_path, demo_http), call_path=journaled) as served:

        async def scenario() -> tuple[Any, list[dict[str, Any]]]:
            async with connect(served.url, "legacy") as client:
                assert not (await client.call_tool("list_contacts", {})).is_error
                await anyio.to_thread.run_sync(_engage_kill_switch)
                before = await anyio.to_thread.run_sync(_world_calls, demo_http)
                refused = await client.call_tool("list_contacts", {})
                after = await anyio.to_thread.run_sync(_world_calls, demo_http)
                return refused, after[len(before) :]

        refused, calls = anyio.run(scenario)

    assert refused.is_error and "did NOT run" in text(refused)
    assert calls == []  # the second read was never sent
    steps = _steps()
    assert [(s.action, s.status) for s in steps] == [(READ, "COMPLETED"), (READ, "REFUSED")]
    assert steps[1].error["code"] == "KILL_SWITCH_ENGAGED"
