"""Black-box A2A approval gates: a `run` that stops at a gate is INPUT_REQUIRED, and the task goes on after an
authorized peer's `approve` (a message naming the task) or an operator's decision through REST."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import httpx
import pytest
from a2a.helpers import get_data_parts, new_data_part
from a2a.types.a2a_pb2 import GetTaskRequest, ListTasksRequest, Task
from a2a.utils.errors import InvalidParamsError, UnsupportedOperationError

from sagas.models import A2ATask
from sagas.protocols.a2a.gates import REQUESTER_KEY
from tests.contracts import http_contract, register
from tests.httpserver import RecordingHTTPServer
from tests.protocols.a2a_client import COMPLETED, INPUT_REQUIRED, REJECTED, Peer, connect, reason, result
from tests.protocols.conftest import ALICE, BOB, VERA, RunningServer


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def register_actions(downstream: RecordingHTTPServer, second_gate: bool = False) -> None:
    """Charging waits for an approval; shipping too when asked."""
    register(http_contract("charge_card", downstream.url, approval_required=True))
    register(http_contract("ship_order", downstream.url, approval_required=second_gate))


async def gated_saga(peer: Peer) -> str:
    """A saga whose charge waits for an approval, then ships."""
    sid: str = (await peer.ok({"operation": "begin"}))["id"]
    await peer.ok(
        {"operation": "plan", "saga_id": sid, "action": "charge_card", "input": {"amount": 5}, "key": "charge"}
    )
    ship = {"operation": "plan", "saga_id": sid, "action": "ship_order", "input": {}, "key": "ship"}
    await peer.ok({**ship, "depends_on": ["charge"]})
    return sid


def gate(task: Task) -> dict[str, Any]:
    data: dict[str, Any] = get_data_parts([p for p in task.status.message.parts if p.HasField("data")])[0]
    return data


async def approve(peer: Peer, task: Task, **extra: Any) -> Task:
    command = {**gate(task)["approve"], "reason": "fine", **extra}
    return await peer.send(command, task_id=task.id, context_id=task.context_id)


def test_a_gated_run_waits_for_input_and_peer_approvals_carry_it_through_each_gate_to_completion(
    server: RunningServer, downstream: RecordingHTTPServer
):
    register_actions(downstream, second_gate=True)

    async def scenario() -> tuple[str, Task, Task, Task, Any, UnsupportedOperationError]:
        async with connect(server.base, ALICE) as alice, connect(server.base, BOB) as bob:
            sid = await gated_saga(alice)
            # when alice runs the saga, the run stops at the charge's gate
            waiting = await alice.send({"operation": "run", "saga_id": sid})
            # then bob (an operator of the tenant) approves it as a message naming the task: the run goes on to ship
            at_ship = await approve(bob, waiting)
            # and alice approves the ship gate the same way: the task completes
            done = await approve(alice, at_ship)
            read = await bob.client.get_task(GetTaskRequest(id=waiting.id))
            # a finished task takes no further message, an approve included
            with pytest.raises(UnsupportedOperationError) as refused:
                await approve(alice, at_ship)
            return sid, waiting, at_ship, done, read, refused.value

    sid, waiting, at_ship, done, read, refused = run(scenario())
    assert waiting.status.state == INPUT_REQUIRED
    charge = next(n for n in result(waiting)["workflow"]["nodes"] if n["key"] == "charge")
    why = reason(waiting)
    for needed in (f"node charge (id {charge['id']})", "action charge_card", "operator", "console", "REST API"):
        assert needed in why, why
    assert f"taskId {waiting.id}" in why and '"operation": "approve"' in why and charge["id"] in why
    assert gate(waiting)["approve"] == {
        "operation": "approve",
        "saga_id": sid,
        "node_id": charge["id"],
        "reason": "<why>",
    }
    assert REQUESTER_KEY not in waiting.metadata.fields  # the identity kept to go on is never shown to peers
    assert at_ship.id == waiting.id and at_ship.status.state == INPUT_REQUIRED
    assert gate(at_ship)["awaiting_approval"]["key"] == "ship"
    assert done.status.state == COMPLETED and result(done)["run"]["node_counts"] == {"COMPLETED": 2}
    assert read.status.state == COMPLETED and len(read.artifacts) == 1
    # the history keeps the peers' approve messages, in order
    approvals = [m for m in read.history if m.parts and m.parts[0].HasField("data") and m.role == 1]
    assert [get_data_parts(m.parts)[0]["operation"] for m in approvals] == ["run", "approve", "approve"]
    assert "takes no further messages" in refused.message
    assert [r[1] for r in downstream.requests] == ["/charge_card", "/ship_order"]
    assert A2ATask.objects.get(pk=waiting.id).state == "TASK_STATE_COMPLETED"


def test_an_operator_approval_through_rest_completes_the_waiting_task_when_it_is_next_read(
    server: RunningServer, downstream: RecordingHTTPServer
):
    register_actions(downstream)

    async def scenario() -> tuple[Task, Task, list[Task]]:
        async with connect(server.base, ALICE) as alice:
            sid = await gated_saga(alice)
            waiting = await alice.send({"operation": "run", "saga_id": sid})
            # when bob approves in the REST API (the console's buttons drive the same operation)
            answer = httpx.post(
                f"{server.base}/api/v1/sagas/{sid}/nodes/charge/approve/",
                json={"reason": "checked by phone"},
                headers={"Authorization": f"Bearer {BOB}"},
                timeout=30,
            )
            assert answer.status_code == 200, answer.text
            # then reading the task brings it up to date: it goes on and completes
            seen: list[Task] = []
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and (not seen or seen[-1].status.state != COMPLETED):
                seen.append(await alice.client.get_task(GetTaskRequest(id=waiting.id)))
                await asyncio.sleep(0.05)
            listed = await alice.client.list_tasks(ListTasksRequest(status=COMPLETED, include_artifacts=True))
            assert waiting.id in [t.id for t in listed.tasks]
            return waiting, seen[-1], seen

    waiting, final, seen = run(scenario())
    assert waiting.status.state == INPUT_REQUIRED
    assert seen[0].status.state != INPUT_REQUIRED  # the first read after the approval already moved it on
    assert final.status.state == COMPLETED and result(final)["run"]["node_counts"] == {"COMPLETED": 2}
    assert [r[1] for r in downstream.requests] == ["/charge_card", "/ship_order"]


def test_an_operator_rejection_rejects_the_waiting_task_with_the_reason(
    server: RunningServer, downstream: RecordingHTTPServer
):
    register_actions(downstream)

    async def scenario() -> Task:
        async with connect(server.base, ALICE) as alice:
            sid = await gated_saga(alice)
            waiting = await alice.send({"operation": "run", "saga_id": sid})
            answer = httpx.post(
                f"{server.base}/api/v1/sagas/{sid}/nodes/charge/reject/",
                json={"reason": "card reported stolen"},
                headers={"Authorization": f"Bearer {BOB}"},
                timeout=30,
            )
            assert answer.status_code == 200, answer.text
            return await alice.client.get_task(GetTaskRequest(id=waiting.id))

    task = run(scenario())
    assert task.status.state == REJECTED
    why = reason(task)
    assert "was rejected by bob: card reported stolen" in why and "charge" in why
    assert downstream.requests == []


def test_a_viewer_approve_is_refused_and_the_task_keeps_waiting_for_someone_allowed(
    server: RunningServer, downstream: RecordingHTTPServer
):
    register_actions(downstream)

    async def scenario() -> tuple[Task, Task, Task]:
        async with connect(server.base, ALICE) as alice, connect(server.base, VERA) as vera:
            sid = await gated_saga(alice)
            waiting = await alice.send({"operation": "run", "saga_id": sid})
            still = await approve(vera, waiting)
            rejected = await approve(alice, still, approved=False)
            return waiting, still, rejected

    waiting, still, rejected = run(scenario())
    assert still.id == waiting.id and still.status.state == INPUT_REQUIRED
    assert "Your approve command was refused (FORBIDDEN" in reason(still) and "Still waiting" in reason(still)
    assert rejected.status.state == REJECTED and "was rejected by alice: fine" in reason(rejected)
    assert downstream.requests == []


def test_a_waiting_task_takes_only_its_approve_command(server: RunningServer, downstream: RecordingHTTPServer):
    register_actions(downstream)

    async def scenario() -> tuple[Task, InvalidParamsError, Task]:
        async with connect(server.base, ALICE) as alice:
            sid = await gated_saga(alice)
            waiting = await alice.send({"operation": "run", "saga_id": sid})
            with pytest.raises(InvalidParamsError) as refused:
                await alice.send_parts([new_data_part({"operation": "commit", "saga_id": sid})], task_id=waiting.id)
            return waiting, refused.value, await alice.client.get_task(GetTaskRequest(id=waiting.id))

    waiting, error, reread = run(scenario())
    assert f"Task {waiting.id} waits for an approval and takes only its approve command" in error.message
    assert '"operation": "approve"' in error.message and "Nothing was changed" in error.message
    assert reread.status.state == INPUT_REQUIRED and len(reread.history) == len(waiting.history)


def test_a_continued_task_left_working_by_a_dead_process_is_taken_over_when_next_read(
    server: RunningServer, downstream: RecordingHTTPServer
):
    register_actions(downstream)

    async def scenario() -> tuple[Task, Task]:
        async with connect(server.base, ALICE) as alice:
            sid = await gated_saga(alice)
            waiting = await alice.send({"operation": "run", "saga_id": sid})
            # the task as a process that claimed its continuation and then died leaves it: WORKING, long untouched
            await asyncio.to_thread(_left_working_by_a_dead_process, waiting.id)
            answer = httpx.post(
                f"{server.base}/api/v1/sagas/{sid}/nodes/charge/approve/",
                json={},
                headers={"Authorization": f"Bearer {BOB}"},
                timeout=30,
            )
            assert answer.status_code == 200, answer.text
            deadline = time.monotonic() + 60
            final = await alice.client.get_task(GetTaskRequest(id=waiting.id))
            while time.monotonic() < deadline and final.status.state != COMPLETED:
                await asyncio.sleep(0.1)
                final = await alice.client.get_task(GetTaskRequest(id=waiting.id))
            return waiting, final

    waiting, final = run(scenario())
    assert waiting.status.state == INPUT_REQUIRED
    assert final.status.state == COMPLETED and result(final)["run"]["node_counts"] == {"COMPLETED": 2}
    assert [r[1] for r in downstream.requests] == ["/charge_card", "/ship_order"]


def _left_working_by_a_dead_process(task_id: str) -> None:
    import datetime as dt

    from django.db import connections
    from django.utils import timezone

    try:
        row = A2ATask.objects.get(pk=task_id)
        row.task["status"]["state"] = "TASK_STATE_WORKING"
        long_ago = timezone.now() - dt.timedelta(minutes=10)
        A2ATask.objects.filter(pk=task_id).update(state="TASK_STATE_WORKING", task=row.task, updated_at=long_ago)
    finally:
        connections.close_all()
