"""Every tools/call through the durable path is a journaled step of its session's saga: written before it is
forwarded (the downstream sees the step id as its idempotency key), classified with its source, gated (block,
confirm held while an operator decides, timeout denied), all in a verifiable audit chain. The agent is the official
mcp client; the downstream is the demo world over Streamable HTTP."""

from __future__ import annotations

import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import anyio
import pytest
from django.conf import settings
from django.db import connections
from mcp.shared.exceptions import MCPError

from audit.models import AuditEvent
from governance.identity.principal import local_principal
from sagas.models import Node, Saga, Step
from sagas.operations.invoke import invoke
from sagas.operations.table import OPERATIONS
from sagas.protocols.proxy import client_sessions
from sagas.protocols.proxy.calls import ClientIdentity
from sagas.protocols.proxy.config import load_proxy_config
from sagas.protocols.proxy.downstream import DownstreamManager
from sagas.protocols.proxy.durable import DurableCallPath
from sagas.protocols.proxy.runtime import journaled
from sagas.selectors import saga_verify_audit
from tests.proxy.agent import MODES, connect, text, tool_names
from tests.proxy.harness import TINY, HttpDownstream, config_file, serve_proxy, stdio

pytestmark = pytest.mark.django_db(transaction=True)
OPERATOR = local_principal(protocol="test", tenant_id="acme")
WAIT_SECONDS = 30


def _config(tmp_path: Path, demo_http: HttpDownstream, **policy: Any) -> Path:
    return config_file(tmp_path, {"demo": {"url": demo_http.url}}, policy=policy)


async def _calls(client: Any) -> list[dict[str, Any]]:
    log = await client.call_tool("get_call_log", {})
    return list(log.structured_content["calls"])


def _session() -> Saga:
    return Saga.objects.get(metadata__has_key="proxy")


@pytest.mark.parametrize("mode", MODES)
def test_a_forwarded_call_is_journaled_first_and_carries_its_step_id(
    tmp_path: Path, demo_http: HttpDownstream, mode: str
):
    with serve_proxy(_config(tmp_path, demo_http), call_path=journaled) as served:

        async def scenario() -> list[dict[str, Any]]:
            async with connect(served.url, mode) as client:
                created = await client.call_tool("create_contact", {"name": "Ada", "email": "ada@example.com"})
                assert not created.is_error, text(created)
                return await _calls(client)

        calls = anyio.run(scenario)

    session = _session()
    create = Step.objects.get(saga=session, action="proxy.demo.create_contact")
    assert create.status == "COMPLETED" and create.input == {"name": "Ada", "email": "ada@example.com"}
    assert [c["idempotency_key"] for c in calls if c["tool"] == "create_contact"][-1] == str(create.id)
    proxy = create.action_definition["proxy"]
    # no pack: a create is unknown by its name (only a declared inverse says R), and the factory gate allows it
    assert (proxy["class"], proxy["class_source"], proxy["gate"]) == ("unknown", "heuristic", "allow")
    assert create.result["size_bytes"] > 0 and create.result["duration_ms"] >= 0
    started = AuditEvent.objects.get(saga_id=session.id, step_id=str(create.id), event_type="STEP_STARTED")
    completed = AuditEvent.objects.get(saga_id=session.id, step_id=str(create.id), event_type="STEP_COMPLETED")
    assert started.sequence < completed.sequence  # journaled EXECUTING before the outcome
    assert saga_verify_audit(actor=OPERATOR, saga_id=session.id)["valid"] is True
    # tampering with a recorded event is detected
    AuditEvent.objects.filter(pk=started.pk).update(status="COMPLETED")
    assert saga_verify_audit(actor=OPERATOR, saga_id=session.id)["valid"] is False


def test_a_blocked_tool_is_recorded_refused_and_never_forwarded(tmp_path: Path, demo_http: HttpDownstream):
    config = _config(tmp_path, demo_http, tools=[{"tool": "send_email", "action": "block", "reason": "no mail"}])
    with serve_proxy(config, call_path=journaled) as served:

        async def scenario() -> tuple[Any, list[dict[str, Any]]]:
            async with connect(served.url, "legacy") as client:
                before = len(await _calls(client))
                refused = await client.call_tool("send_email", {"to": "a@example.com", "subject": "s", "body": "b"})
                return refused, (await _calls(client))[before:]

        refused, calls = anyio.run(scenario)

    assert refused.is_error and "did NOT run" in text(refused)
    assert refused.meta["io.semantic-saga/proxy"]["gate"] == "block"
    assert calls == []  # nothing reached the world
    step = Step.objects.get(saga=_session(), action="proxy.demo.send_email")
    assert step.status == "REFUSED" and step.error["code"] == "GATE_BLOCKED"


def _approve_when_held(decided: list[str]) -> None:
    deadline = time.monotonic() + WAIT_SECONDS
    try:
        while time.monotonic() < deadline:
            node = Node.objects.filter(key__startswith="proxy-call-", status="WAITING_APPROVAL").first()
            if node is not None:
                arguments = {"saga_id": str(node.saga_id), "node_id": str(node.id)}
                invoke(OPERATIONS["approve_saga_step"], OPERATOR, arguments)
                decided.append(str(node.id))
                return
            time.sleep(0.1)
    finally:
        connections.close_all()  # a thread of its own: the test database is dropped at the end of the run


def test_a_confirmed_call_is_held_until_an_operator_approves_then_forwarded(tmp_path: Path, demo_http: HttpDownstream):
    with serve_proxy(_config(tmp_path, demo_http), call_path=journaled) as served:
        decided: list[str] = []
        operator = threading.Thread(target=_approve_when_held, args=(decided,))  # closes its connection
        operator.start()

        async def scenario() -> Any:
            async with connect(served.url, "legacy") as client:
                args = {"from_account": "acc-payroll", "to_account": "acc-vendor", "amount": 5}
                return await client.call_tool("transfer_funds", args)

        result = anyio.run(scenario)
        operator.join(timeout=WAIT_SECONDS)

    assert decided and not result.is_error and "transfer_id" in result.structured_content
    node = Node.objects.get(pk=decided[0])
    assert node.status == "COMPLETED" and node.step is not None and node.step.status == "COMPLETED"
    assert node.step.action_definition["proxy"]["class"] == "I"


def test_a_held_call_nobody_approves_is_denied_at_the_timeout_and_never_forwarded(
    tmp_path: Path, demo_http: HttpDownstream
):
    with serve_proxy(_config(tmp_path, demo_http, confirmTimeoutMs=1500), call_path=journaled) as served:

        async def scenario() -> tuple[Any, list[dict[str, Any]]]:
            async with connect(served.url, "legacy") as client:
                before = len(await _calls(client))
                args = {"from_account": "acc-payroll", "to_account": "acc-vendor", "amount": 7}
                denied = await client.call_tool("transfer_funds", args)
                return denied, (await _calls(client))[before:]

        denied, calls = anyio.run(scenario)

    assert denied.is_error and "confirm timeout" in text(denied)
    assert calls == []  # nothing reached the world
    node = Node.objects.get(saga=_session(), key__startswith="proxy-call-")
    assert node.status == "REJECTED" and node.step.status == "REFUSED"
    assert node.approvals.get().status == "EXPIRED"
    with pytest.raises(Exception, match="not waiting for approval"):
        invoke(OPERATIONS["approve_saga_step"], OPERATOR, {"saga_id": str(node.saga_id), "node_id": str(node.id)})


def test_a_hidden_tool_is_left_out_of_tools_list_and_refused_if_called(tmp_path: Path, demo_http: HttpDownstream):
    config = _config(tmp_path, demo_http, tools=[{"tool": "post_tweet", "action": "hide"}])
    with serve_proxy(config, call_path=journaled) as served:

        async def scenario() -> tuple[list[str], MCPError]:
            async with connect(served.url, "legacy") as client:
                names = await tool_names(client)
                with pytest.raises(MCPError) as refused:
                    await client.call_tool("post_tweet", {"text": "hello"})
                return names, refused.value

        names, refused = anyio.run(scenario)

    assert "post_tweet" not in names and "send_email" in names
    # called anyway, it answers as a tool no server offers: nothing sent, nothing journaled
    assert refused.code == -32602 and refused.message.startswith("Unknown tool 'post_tweet'")
    assert not Step.objects.filter(action="proxy.demo.post_tweet").exists()


def _sessions_once_opened() -> list[Saga]:
    deadline = time.monotonic() + WAIT_SECONDS
    try:
        while not (sessions := list(Saga.objects.filter(metadata__has_key="proxy"))):
            assert time.monotonic() < deadline, "no session saga was opened at the handshake"
            time.sleep(0.05)
        return sessions
    finally:
        connections.close_all()


def test_a_handshake_session_is_a_saga_from_initialize_and_stateless_calls_share_one(
    tmp_path: Path, demo_http: HttpDownstream
):
    with serve_proxy(_config(tmp_path, demo_http), call_path=journaled) as served:

        async def handshake() -> list[Saga]:
            async with connect(served.url, "legacy") as client:
                await client.list_tools()  # no call yet
                # notifications/initialized is handled beside the requests: wait for its session to appear
                return await anyio.to_thread.run_sync(_sessions_once_opened)

        async def stateless() -> None:
            async with connect(served.url, "auto") as client:
                await client.call_tool("list_contacts", {})
                await client.call_tool("list_contacts", {})

        (opened,) = anyio.run(handshake)
        anyio.run(stateless)

    assert opened.metadata["proxy"]["era"] == "2025-11-25" and not opened.steps.exists()
    stateless_sessions = Saga.objects.filter(metadata__proxy__era="2026-07-28")
    assert stateless_sessions.count() == 1 and stateless_sessions.get().steps.count() == 2


def test_a_stateless_client_idle_past_the_setting_gets_a_new_session(tmp_path: Path, demo_http: HttpDownstream):
    config = load_proxy_config(_config(tmp_path, demo_http))
    path = DurableCallPath(DownstreamManager(config), config)
    client = ClientIdentity(key="k1", session_id=None, protocol_version="2026-07-28", stateless=True, client_name="a")

    async def sessions() -> tuple[str, str, str]:
        first = await path._session(OPERATOR, client)
        again = await path._session(OPERATOR, replace(client, key="k2"))  # a stateless request: a fresh key
        first.last_used -= settings.SAGA_PROXY_SESSION_IDLE_SECONDS + 1  # as if it had been idle that long
        later = await path._session(OPERATOR, replace(client, key="k3"))
        await path.aclose()
        return first.saga_id, again.saga_id, later.saga_id

    first, again, later = anyio.run(sessions)
    assert first == again != later


def test_the_sessions_a_proxy_remembers_are_bounded(tmp_path: Path, demo_http: HttpDownstream, monkeypatch):
    monkeypatch.setattr(client_sessions, "SESSIONS_REMEMBERED", 2)
    config = load_proxy_config(_config(tmp_path, demo_http))
    path = DurableCallPath(DownstreamManager(config), config)
    client = ClientIdentity(key="c1", session_id="s", protocol_version="2025-11-25", stateless=False)

    async def open_three() -> list[str]:
        for key in ("c1", "c2", "c3"):
            await path._session(OPERATOR, replace(client, key=key))
        await path.aclose()
        return sorted(path.client_sessions.sessions)

    remembered = anyio.run(open_three)  # the least recently used is forgotten; its saga stays
    assert [key.rsplit("|", 1)[-1] for key in remembered] == ["c2", "c3"]
    assert Saga.objects.filter(metadata__has_key="proxy").count() == 3


def test_a_client_that_goes_away_mid_call_leaves_the_step_uncertain_not_executing(tmp_path: Path):
    called = tmp_path / "called.txt"
    tiny = stdio(TINY, "--journal-tools", "--called-file", str(called))
    with serve_proxy(config_file(tmp_path, {"tiny": tiny}), call_path=journaled) as served:

        async def scenario() -> None:
            async with connect(served.url, "legacy") as client, anyio.create_task_group() as group:
                group.start_soon(client.call_tool, "hang", {"job": "nightly"})
                await anyio.to_thread.run_sync(lambda: _wait(called.exists, "the downstream to be called"))
                group.cancel_scope.cancel()  # the agent goes away while its call is out

        anyio.run(scenario)
        step = _wait(lambda: Step.objects.filter(action="proxy.tiny.hang").exclude(status="EXECUTING").first(), "it")

    assert step.status == "FAILED" and step.uncertain_outcome is True
    assert step.error["code"] == "ANSWER_LOST" and "went away while the call was out" in step.error["message"]
    assert step.lease_owner == ""


def _wait(found: Any, what: str) -> Any:
    deadline = time.monotonic() + WAIT_SECONDS
    try:
        while time.monotonic() < deadline:
            if value := found():
                return value
            time.sleep(0.05)
        raise AssertionError(f"timed out waiting for {what}")
    finally:
        connections.close_all()
