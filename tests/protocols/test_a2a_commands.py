"""Black-box A2A: a real server process, the official a2a-sdk client, structured commands answered as tasks."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from a2a.helpers import new_data_part, new_text_part
from a2a.types.a2a_pb2 import (
    CancelTaskRequest,
    GetTaskRequest,
    ListTasksRequest,
    Part,
    SendMessageConfiguration,
    TaskState,
)
from a2a.utils.errors import InvalidParamsError, TaskNotCancelableError, TaskNotFoundError

from sagas.models import A2ATask, Saga
from sagas.states import SagaStatus
from tests.contracts import http_contract, register
from tests.httpserver import RecordingHTTPServer
from tests.protocols.a2a_client import COMPLETED, connect, result
from tests.protocols.conftest import ALICE, BOB, MALLORY, VERA, RunningServer

SLOW_CALL_SECONDS = 2.0


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def test_peer_a_runs_a_saga_end_to_end_and_peer_b_of_the_tenant_reads_it(
    server: RunningServer, downstream: RecordingHTTPServer
):
    # given two registered actions; charging needs a human's approval
    register(http_contract("charge_card", downstream.url, approval_required=True))
    register(http_contract("update_inventory", downstream.url))

    async def scenario() -> tuple[dict[str, Any], dict[str, Any], str, Any]:
        # when peer A (alice) drives the whole saga with commands only
        async with connect(server.base, ALICE) as alice:
            begun_task = await alice.send({"operation": "begin", "metadata": {"order": "42"}})
            assert begun_task.status.state == COMPLETED
            sid = result(begun_task)["id"]
            charge = await alice.ok(
                {"operation": "plan", "saga_id": sid, "action": "charge_card", "input": {"amount": 5}, "key": "charge"}
            )
            assert charge["status"] == "WAITING_APPROVAL" and charge["input"] == {"amount": 5}
            await alice.ok(
                {
                    "operation": "plan",
                    "saga_id": sid,
                    "action": "update_inventory",
                    "input": {"sku": "a"},
                    "key": "inventory",
                    "depends_on": ["charge"],
                }
            )
            # the run stops at the gate: its task waits for input (test_a2a_input_required follows such tasks)
            gated = await alice.send({"operation": "run", "saga_id": sid})
            assert gated.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
            assert result(gated)["run"]["stopped_because"] == "waiting_approval"
            # an approve sent as a command of its own (no taskId) works as before
            await alice.ok({"operation": "approve", "saga_id": sid, "node_id": "charge", "reason": "fine"})
            # integers arrive as doubles (protobuf Value): 2 becomes 2.0 on the wire and an int again here
            ran = await alice.ok({"operation": "run", "saga_id": sid, "max_parallel": 2})
            assert ran["run"]["node_counts"] == {"COMPLETED": 2}
            committed = await alice.ok({"operation": "commit", "saga_id": sid})
        # then peer B (bob, same tenant) reads the saga and the task peer A created
        async with connect(server.base, BOB) as bob:
            seen = await bob.ok({"operation": "get", "saga_id": sid})
            task = await bob.client.get_task(GetTaskRequest(id=begun_task.id))
        return committed, seen, begun_task.id, task

    committed, seen, task_id, task = run(scenario())
    assert committed["status"] == "COMMITTED"
    assert [s["action"] for s in committed["steps"]] == ["charge_card", "update_inventory"]
    assert seen["id"] == committed["id"] and seen["status"] == "COMMITTED"
    assert task.id == task_id and task.status.state == COMPLETED and result(task)["id"] == committed["id"]
    assert [r[1] for r in downstream.requests] == ["/charge_card", "/update_inventory"]
    # begin recorded who acted and through which protocol, task and context
    metadata = Saga.objects.get(pk=committed["id"]).metadata
    assert metadata["order"] == "42"
    assert metadata["_identity"] == {
        "principal_id": "alice",
        "tenant_id": "acme",
        "principal_type": "user",
        "protocol": "a2a",
        "roles": ["operator"],
        "identity_source": "oauth-access-token",
    }
    assert metadata["_interop"] == {
        "protocol": "a2a",
        "version": "1.0",
        "context_id": task.context_id,
        "task_id": task_id,
    }
    row = A2ATask.objects.get(pk=task_id)
    assert (row.tenant_id, row.operation, row.saga_id, row.state) == (
        "acme",
        "begin",
        committed["id"],
        "TASK_STATE_COMPLETED",
    )


def test_viewer_is_refused_commit_as_a_rejected_task(server: RunningServer):
    async def scenario() -> tuple[str, Any, str]:
        async with connect(server.base, ALICE) as alice:
            sid = (await alice.ok({"operation": "begin"}))["id"]
        async with connect(server.base, VERA) as vera:
            await vera.ok({"operation": "get", "saga_id": sid})  # reading is allowed
            task, why = await vera.refused({"operation": "commit", "saga_id": sid})
        return sid, task, why

    sid, task, why = run(scenario())
    assert why.startswith("Not authorized (the principal is not authorized to call this operation). FORBIDDEN: ")
    assert "FORBIDDEN: vera may not commit" in why and "execute" in why
    assert not task.artifacts
    error = next(p for p in task.status.message.parts if p.HasField("data"))
    assert error.data.struct_value["error"]["code"] == "FORBIDDEN"
    assert Saga.objects.get(pk=sid).status == SagaStatus.ACTIVE


def test_another_tenant_gets_saga_not_found_and_cannot_read_the_task(server: RunningServer):
    async def scenario() -> tuple[str, str]:
        async with connect(server.base, ALICE) as alice:
            begun = await alice.send({"operation": "begin"})
        async with connect(server.base, MALLORY) as mallory:
            _, hidden = await mallory.refused({"operation": "get", "saga_id": result(begun)["id"]})
            with pytest.raises(TaskNotFoundError):
                await mallory.client.get_task(GetTaskRequest(id=begun.id))
            with pytest.raises(TaskNotFoundError):
                await mallory.client.cancel_task(CancelTaskRequest(id=begun.id))
            listed = await mallory.client.list_tasks(ListTasksRequest())
            assert begun.id not in [t.id for t in listed.tasks]
        return hidden, begun.id

    hidden, task_id = run(scenario())
    assert hidden.startswith("SAGA_NOT_FOUND: Saga not found")
    assert A2ATask.objects.get(pk=task_id).tenant_id == "acme"


@pytest.mark.parametrize(
    ("parts", "problem"),
    [
        ([new_text_part('{"operation": "begin"}', media_type="application/json")], "a text part is not a command"),
        ([new_data_part({"operation": "begin"}), new_data_part({"operation": "begin"})], "has 2 parts"),
        ([new_data_part(["begin"])], "must be a JSON object"),
        ([new_data_part({"metadata": {}})], "has no 'operation'"),
        ([new_data_part({"operation": "drop_tables"})], "unknown operation 'drop_tables'"),
        ([new_data_part({"operation": "begin", "owner": "root"})], "owner: unknown field"),
        ([new_data_part({"operation": "get"})], "saga_id: required field missing"),
        ([new_data_part({"operation": "plan", "saga_id": "x", "input": {}})], "action: required field missing"),
        ([new_data_part({"operation": "approve", "saga_id": "x"})], "node_id: required field missing"),
        ([new_data_part({"operation": "checkpoint", "saga_id": "x"})], "name: required field missing"),
        ([new_data_part({"operation": "run", "saga_id": "x", "max_parallel": "4"})], "max_parallel"),
        ([new_data_part({"operation": "run", "saga_id": "x", "max_parallel": 2.5})], "must be a whole number"),
        ([new_data_part({"operation": "run", "saga_id": "x", "max_parallel": 99})], "max_parallel"),
        ([new_data_part({"operation": "begin", "metadata": "not an object"})], "metadata"),
    ],
)
def test_malformed_messages_are_refused_before_any_task_exists(server: RunningServer, parts: list[Part], problem: str):
    async def scenario() -> InvalidParamsError:
        async with connect(server.base, ALICE) as alice:
            with pytest.raises(InvalidParamsError) as refused:
                await alice.send_parts(parts)
            return refused.value

    error = run(scenario())
    assert problem in error.message and "Nothing was created" in error.message
    assert A2ATask.objects.count() == 0 and Saga.objects.count() == 0


def test_a_long_run_answers_at_once_when_asked_and_is_polled_by_another_peer(
    server: RunningServer, downstream: RecordingHTTPServer
):
    # given a planned node whose downstream call takes a while
    register(http_contract("slow_call", downstream.url))
    downstream.script("/slow_call", [(200, {"ok": True}, SLOW_CALL_SECONDS)])

    async def scenario() -> tuple[Any, float, Any, Any]:
        async with connect(server.base, ALICE) as alice:
            sid = (await alice.ok({"operation": "begin"}))["id"]
            await alice.ok({"operation": "plan", "saga_id": sid, "action": "slow_call", "input": {}})
            # when alice runs it without waiting for the outcome
            started = time.monotonic()
            working = await alice.send(
                {"operation": "run", "saga_id": sid}, SendMessageConfiguration(return_immediately=True)
            )
            answered_after = time.monotonic() - started
        # then bob (same tenant) sees the task working, cannot cancel it, and polls it until it settles
        async with connect(server.base, BOB) as bob:
            seen = await bob.client.get_task(GetTaskRequest(id=working.id))
            with pytest.raises(TaskNotCancelableError):
                await bob.client.cancel_task(CancelTaskRequest(id=working.id))
            deadline = time.monotonic() + 60
            final = seen
            while final.status.state == TaskState.TASK_STATE_WORKING and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
                final = await bob.client.get_task(GetTaskRequest(id=working.id))
        return working, answered_after, seen, final

    working, answered_after, seen, final = run(scenario())
    assert working.status.state == seen.status.state == TaskState.TASK_STATE_WORKING
    assert answered_after < SLOW_CALL_SECONDS
    assert final.status.state == COMPLETED and result(final)["run"]["node_counts"] == {"COMPLETED": 1}
    assert [r[1] for r in downstream.requests] == ["/slow_call"]  # the side effect ran to its end, once


def test_cancel_task_never_interrupts_and_points_to_rollback(server: RunningServer):
    async def scenario() -> tuple[str, TaskNotCancelableError, Any]:
        async with connect(server.base, ALICE) as alice:
            begun = await alice.send({"operation": "begin"})
            with pytest.raises(TaskNotCancelableError) as refused:
                await alice.client.cancel_task(CancelTaskRequest(id=begun.id))
            return begun.id, refused.value, await alice.client.get_task(GetTaskRequest(id=begun.id))

    task_id, error, task = run(scenario())
    assert '"operation": "rollback"' in error.message and task_id in error.message
    assert task.status.state == COMPLETED


def test_tasks_are_listed_newest_first_with_pages_filters_and_history_length(server: RunningServer):
    async def scenario() -> None:
        async with connect(server.base, ALICE) as alice:
            # given three tasks in one context and a refused one in another
            first = await alice.send({"operation": "list_sagas"}, context_id="ctx-1")
            second = await alice.send({"operation": "list_actions"}, context_id="ctx-1")
            third = await alice.send({"operation": "begin"}, context_id="ctx-1")
            refused, _ = await alice.refused({"operation": "get", "saga_id": "00000000-0000-0000-0000-000000000000"})
            # when listing one context, two at a time
            page = await alice.client.list_tasks(ListTasksRequest(context_id="ctx-1", page_size=2))
            rest = await alice.client.list_tasks(
                ListTasksRequest(context_id="ctx-1", page_size=2, page_token=page.next_page_token)
            )
            # then pages come newest first, without overlap, and say how many there are
            assert [t.id for t in page.tasks] == [third.id, second.id] and page.total_size == 3
            assert [t.id for t in rest.tasks] == [first.id] and not rest.next_page_token
            # artifacts only on request; history trimmed to the asked length
            assert not page.tasks[0].artifacts
            full = await alice.client.list_tasks(ListTasksRequest(context_id="ctx-1", include_artifacts=True))
            assert result(full.tasks[0])["status"] == "ACTIVE"
            rejected = await alice.client.list_tasks(ListTasksRequest(status=TaskState.TASK_STATE_REJECTED))
            assert [t.id for t in rejected.tasks] == [refused.id]
            got = await alice.client.get_task(GetTaskRequest(id=first.id, history_length=0))
            assert got.status.state == COMPLETED and len(got.history) == 0
            got = await alice.client.get_task(GetTaskRequest(id=first.id))
            assert len(got.history) == 1 and got.history[0].parts[0].data.struct_value["operation"] == "list_sagas"

    run(scenario())
    assert A2ATask.objects.filter(tenant_id="acme").count() == 4
