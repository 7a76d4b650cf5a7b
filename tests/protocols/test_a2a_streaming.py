"""Black-box A2A streaming from durable state: two `semantic-saga serve` processes on one database. A stream dropped
on one resumes on the other (SubscribeToTask) and still receives the terminal event; a subscription to a task
waiting for an approval follows an operator's decision, made through another process, to completion."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from contextlib import aclosing
from typing import Any

import httpx
import pytest
from a2a.helpers import new_data_part
from a2a.types.a2a_pb2 import Message, Role, SendMessageRequest, StreamResponse, SubscribeToTaskRequest

from tests.contracts import http_contract, register
from tests.httpserver import RecordingHTTPServer
from tests.protocols.a2a_client import COMPLETED, INPUT_REQUIRED, WORKING, Peer, connect, result, state_of
from tests.protocols.conftest import ALICE, BOB, RunningServer, start_server

SLOW_CALL_SECONDS = 4.0  # long enough for the reconnect to find the task still WORKING


@pytest.fixture(scope="module")
def servers(
    django_db_setup: None, django_db_blocker: object, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[RunningServer, RunningServer]]:
    first = start_server(tmp_path_factory.mktemp("first"))
    try:
        second = start_server(tmp_path_factory.mktemp("second"))
    except BaseException:
        first.proc.terminate()
        raise
    try:
        yield first, second
    finally:
        for running in (first, second):
            running.proc.terminate()
            running.proc.wait(timeout=30)


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def request(command: dict[str, Any]) -> SendMessageRequest:
    return SendMessageRequest(
        message=Message(message_id=f"m-{time.monotonic_ns()}", role=Role.ROLE_USER, parts=[new_data_part(command)])
    )


async def whole_stream(peer: Peer, task_id: str, opened: asyncio.Event | None = None) -> list[StreamResponse]:
    """SubscribeToTask to its end; `opened` is set once the first event (the snapshot) has arrived."""
    events: list[StreamResponse] = []
    async with aclosing(peer.client.subscribe(SubscribeToTaskRequest(id=task_id))) as stream:
        async for event in stream:
            events.append(event)
            if opened is not None:
                opened.set()
    return events


def test_a_stream_dropped_on_one_server_resumes_on_another_and_receives_the_terminal_event(
    servers: tuple[RunningServer, RunningServer], downstream: RecordingHTTPServer
):
    first, second = servers
    register(http_contract("slow_call", downstream.url))
    downstream.script("/slow_call", [(200, {"ok": True}, SLOW_CALL_SECONDS)])

    async def scenario() -> tuple[StreamResponse, list[StreamResponse]]:
        async with connect(first.base, ALICE, streaming=True) as alice:
            sid = (await alice.ok({"operation": "begin"}))["id"]
            await alice.ok({"operation": "plan", "saga_id": sid, "action": "slow_call", "input": {}})
            # when alice streams a run on the first server and drops the stream after its first event
            async with aclosing(alice.client.send_message(request({"operation": "run", "saga_id": sid}))) as stream:
                started = await anext(stream)
        # then bob reconnects to the second server, which never ran the command, and follows it to its end
        async with connect(second.base, BOB, streaming=True) as bob:
            return started, await whole_stream(bob, started.task.id)

    started, resumed = run(scenario())
    assert state_of(started) == WORKING
    assert resumed[0].HasField("task") and resumed[0].task.id == started.task.id
    assert state_of(resumed[-1]) == COMPLETED and resumed[-1].HasField("status_update")
    (artifact,) = [e.artifact_update.artifact for e in resumed if e.HasField("artifact_update")]
    assert artifact.name == "semantic-saga-result"
    assert [r[1] for r in downstream.requests] == ["/slow_call"]  # the side effect ran once, to its end


def test_a_subscription_to_a_waiting_task_follows_an_operator_approval_to_completion(
    servers: tuple[RunningServer, RunningServer], downstream: RecordingHTTPServer
):
    first, second = servers
    register(http_contract("charge_card", downstream.url, approval_required=True))

    async def scenario() -> tuple[list[StreamResponse], list[StreamResponse]]:
        async with connect(first.base, ALICE, streaming=True) as alice:
            sid = (await alice.ok({"operation": "begin"}))["id"]
            await alice.ok({"operation": "plan", "saga_id": sid, "action": "charge_card", "input": {}, "key": "c"})
            # a streamed run ends its stream at the gate (INPUT_REQUIRED)
            async with aclosing(alice.client.send_message(request({"operation": "run", "saga_id": sid}))) as stream:
                streamed = [event async for event in stream]
            task_id = streamed[0].task.id
        async with connect(second.base, ALICE, streaming=True) as watcher:
            opened = asyncio.Event()
            following = asyncio.create_task(whole_stream(watcher, task_id, opened))
            await asyncio.wait_for(opened.wait(), timeout=30)  # the subscription has its snapshot before the decision
            # when an operator approves through the first server's REST API
            async with httpx.AsyncClient(timeout=30) as http:
                answer = await http.post(
                    f"{first.base}/api/v1/sagas/{sid}/nodes/c/approve/",
                    json={"reason": "ok"},
                    headers={"Authorization": f"Bearer {BOB}"},
                )
                assert answer.status_code == 200, answer.text
            return streamed, await asyncio.wait_for(following, timeout=60)

    streamed, followed = run(scenario())
    assert state_of(streamed[0]) == WORKING and state_of(streamed[-1]) == INPUT_REQUIRED
    assert state_of(followed[0]) == INPUT_REQUIRED  # the snapshot
    # then its changes (WORKING, unless the run ended within one poll) through completion
    states = [state_of(event) for event in followed if state_of(event) is not None]
    assert states[-1] == COMPLETED and set(states[1:-1]) <= {WORKING}
    final = next(e.artifact_update.artifact for e in reversed(followed) if e.HasField("artifact_update"))
    assert final.parts[0].data.struct_value["run"]["node_counts"]["COMPLETED"] == 1
    assert [r[1] for r in downstream.requests] == ["/charge_card"]


def test_streaming_a_begin_yields_the_task_then_its_result_and_completion(
    servers: tuple[RunningServer, RunningServer],
):
    first, _ = servers

    async def scenario() -> list[StreamResponse]:
        async with (
            connect(first.base, ALICE, streaming=True) as alice,
            aclosing(alice.client.send_message(request({"operation": "begin"}))) as stream,
        ):
            return [event async for event in stream]

    events = run(scenario())
    assert events[0].HasField("task") and state_of(events[-1]) == COMPLETED
    task = events[0].task
    artifact = next(e.artifact_update.artifact for e in events if e.HasField("artifact_update"))
    task.artifacts.append(artifact)
    assert result(task)["status"] == "ACTIVE"


def test_a_streamed_approve_naming_the_waiting_task_follows_it_to_completion_on_another_server(
    servers: tuple[RunningServer, RunningServer], downstream: RecordingHTTPServer
):
    first, second = servers
    register(http_contract("charge_card", downstream.url, approval_required=True))

    async def scenario() -> list[StreamResponse]:
        async with connect(first.base, ALICE, streaming=True) as alice:
            sid = (await alice.ok({"operation": "begin"}))["id"]
            await alice.ok({"operation": "plan", "saga_id": sid, "action": "charge_card", "input": {}, "key": "c"})
            waiting = await alice.send({"operation": "run", "saga_id": sid})
            assert waiting.status.state == INPUT_REQUIRED
        approve = request({"operation": "approve", "saga_id": sid, "node_id": "c", "reason": "ok"})
        approve.message.task_id = waiting.id
        async with (
            connect(second.base, BOB, streaming=True) as bob,
            aclosing(bob.client.send_message(approve)) as stream,
        ):
            return [event async for event in stream]

    events = run(scenario())
    # the task first (WORKING, unless the run already ended), then its changes through completion
    assert events[0].HasField("task") and state_of(events[0]) in (WORKING, COMPLETED)
    assert state_of(events[-1]) == COMPLETED
    assert [r[1] for r in downstream.requests] == ["/charge_card"]
