"""Long saga tools as MCP tasks, over Streamable HTTP with the official `mcp` client in both eras (legacy:
2025-11-25 tasks; auto: the 2026-07-28 extension): a gated run is a task that waits for the approval (input_required,
naming the node) and completes after an operator approves in the console; its result is fetched from another server
process after a restart; tasks/cancel stops scheduling; tasks are their creator's; a blocking run sends progress
notifications; a client that negotiates no tasks gets today's inline answers."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp.types as types
import pytest
from django.db import connections
from mcp import Client
from mcp.client.extension import NotificationBinding
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from audit.models import AuditEvent
from sagas.models import Node, Saga
from tests.approvals import console_operator
from tests.contracts import register
from tests.protocols.conftest import ALICE, MALLORY, RunningServer, start_server
from tests.protocols.mcp_client import MODES, call
from tests.proxy import task_agent as tasks

DECIDE = "/admin/sagas/saga/approvals/decide/"
EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "action_registry.json"


@pytest.fixture(autouse=True)
def _noop_registered() -> None:
    actions = json.loads(EXAMPLES.read_text())["actions"]
    register(next(action for action in actions if action["id"] == "noop"))


class StatusWatchingTasks(tasks.Tasks):
    """The tasks extension, also observing notifications/tasks/status (the mcp 2.3 client drops notifications its
    2025-11-25 tables lack unless an extension binds them)."""

    def __init__(self, notes: list[dict[str, Any]]) -> None:
        self.notes = notes

    def notifications(self) -> list[NotificationBinding[Any]]:
        async def keep(params: types.TaskStatusNotificationParams) -> None:
            self.notes.append(params.model_dump(by_alias=True, exclude_none=True))

        return [
            NotificationBinding(
                method="notifications/tasks/status", params_type=types.TaskStatusNotificationParams, handler=keep
            )
        ]


@asynccontextmanager
async def agent(
    server: RunningServer, token: str, mode: str, notes: list[dict[str, Any]] | None = None
) -> AsyncIterator[Client]:
    """A client that negotiates tasks (the 2026-07-28 extension is listed on every request); the task status
    notifications it receives go to `notes`."""
    headers = {"Authorization": f"Bearer {token}"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30.0, read=120.0)) as http,
        Client(
            streamable_http_client(server.mcp_url, http_client=http),
            mode=mode,
            cache=None,
            extensions=[StatusWatchingTasks(notes if notes is not None else [])],
        ) as client,
    ):
        yield client


def _in_thread(work: Callable[[], Any]) -> Any:
    def run() -> Any:
        try:
            return work()
        finally:
            connections.close_all()  # the test database is dropped at the end; an open connection would block it

    return anyio.to_thread.run_sync(run)


async def _gated_saga(client: Client) -> tuple[str, str]:
    saga = await call(client, "begin_saga", {"metadata": {"task": "gated"}})
    gated = await call(
        client,
        "plan_saga_step",
        {"saga_id": saga["id"], "action": "noop", "input": {}, "key": "gate", "approval_required": True},
    )
    after = {"saga_id": saga["id"], "action": "noop", "input": {}, "key": "after", "depends_on": ["gate"]}
    await call(client, "plan_saga_step", after)
    return saga["id"], gated["id"]


async def _until_status(client: Client, task_id: str, wanted: str) -> dict[str, Any]:
    with anyio.fail_after(60):
        while (task := await tasks.get_task(client, task_id))["status"] != wanted:
            assert task["status"] not in tasks.TERMINAL, task
            await anyio.sleep(0.2)
    return task


def _waiting_status(client: Client) -> str:
    return "working" if tasks.modern(client) else "input_required"  # 2026-07-28 asks nothing of the client


async def _until_waiting(client: Client, task_id: str) -> dict[str, Any]:
    with anyio.fail_after(60):
        while "Waiting for an approval" not in (
            (task := await tasks.get_task(client, task_id)).get("statusMessage") or ""
        ):
            assert task["status"] not in tasks.TERMINAL, task
            await anyio.sleep(0.2)
    assert task["status"] == _waiting_status(client)
    return task


def _approve_in_console(node_id: str) -> None:
    console = console_operator(f"olga-{node_id[:8]}", "acme")
    assert console.post(DECIDE, {"decision": "approve", "node": [node_id]}).status_code == 302


@pytest.mark.parametrize("mode", MODES)
def test_a_gated_run_is_a_task_waiting_for_approval_then_completed_after_console_approval(
    server: RunningServer, mode: str
):
    async def scenario() -> tuple[dict[str, Any], dict[str, Any], Any, str]:
        async with agent(server, ALICE, mode) as client:
            saga_id, gate_id = await _gated_saga(client)
            created = await tasks.call_as_task(client, "run_ready_steps", {"saga_id": saga_id})
            waiting = await _until_waiting(client, created["taskId"])
            await _in_thread(lambda: _approve_in_console(gate_id))
            answer = await tasks.task_result(client, created["taskId"])
            return created, waiting, answer, gate_id

    created, waiting, answer, gate_id = anyio.run(scenario)
    assert created["status"] == "working"
    assert gate_id in waiting["statusMessage"] and "noop" in waiting["statusMessage"]
    assert "console" in waiting["statusMessage"]
    assert not answer.is_error
    result = answer.structured_content
    assert result["run"]["stopped_because"] == "no_ready_nodes"
    assert [node["status"] for node in result["workflow"]["nodes"]] == ["COMPLETED", "COMPLETED"]


def test_a_rejection_ends_the_run_task_with_the_saga_in_recovery_required(server: RunningServer):
    async def scenario() -> Any:
        async with agent(server, ALICE, "legacy") as client:
            saga_id, gate_id = await _gated_saga(client)
            created = await tasks.call_as_task(client, "run_ready_steps", {"saga_id": saga_id})
            await _until_waiting(client, created["taskId"])
            console = await _in_thread(lambda: console_operator("rita", "acme"))
            await _in_thread(lambda: console.post(DECIDE, {"decision": "reject", "node": [gate_id]}))
            return await tasks.task_result(client, created["taskId"])

    answer = anyio.run(scenario)
    assert not answer.is_error
    result = answer.structured_content
    assert result["status"] == "RECOVERY_REQUIRED"
    assert [node["status"] for node in result["workflow"]["nodes"]] == ["REJECTED", "BLOCKED"]


@pytest.mark.parametrize("mode", MODES)
def test_cancelling_a_run_task_stops_scheduling_and_says_so(server: RunningServer, mode: str):
    async def scenario() -> tuple[dict[str, Any], str, str]:
        async with agent(server, ALICE, mode) as client:
            saga_id, gate_id = await _gated_saga(client)
            created = await tasks.call_as_task(client, "run_ready_steps", {"saga_id": saga_id})
            await _until_waiting(client, created["taskId"])
            await tasks.cancel_task(client, created["taskId"])
            ended = await tasks.wait_until_ended(client, created["taskId"])
            return ended, saga_id, gate_id

    ended, saga_id, gate_id = anyio.run(scenario)
    assert ended["status"] == "cancelled"
    assert "no further step of this run is scheduled" in ended["statusMessage"]
    assert Saga.objects.get(pk=saga_id).run_steps_left == 0
    assert AuditEvent.objects.filter(saga_id=saga_id, event_type="RUN_STOPPED").count() == 1
    _approve_in_console(gate_id)  # approved after the cancel: nothing runs it, the run was stopped
    assert Node.objects.get(pk=gate_id).status == "READY"


@pytest.mark.parametrize("mode", MODES)
def test_a_one_call_tool_task_ends_with_the_blocking_answer_and_is_its_creators_only(server: RunningServer, mode: str):
    async def listed(client: Client) -> list[str] | int:
        """tasks/list's ids (2025-11-25), or the error code of a 2026-07-28 tasks/list (the extension removed it)."""
        if not tasks.modern(client):
            return [task["taskId"] for task in await tasks.list_tasks(client)]
        with pytest.raises(MCPError) as removed:
            await tasks.list_tasks(client)
        return removed.value.error.code

    async def scenario() -> tuple[Any, Any, Any, str, str]:
        async with agent(server, ALICE, mode) as client:
            saga = await call(client, "begin_saga", {"metadata": {}})
            arguments = {"saga_id": saga["id"], "action": "noop", "input": {}}
            created = await tasks.call_as_task(client, "execute_saga_step", arguments)
            answer = await tasks.task_result(client, created["taskId"])
            mine = await listed(client)
        async with agent(server, MALLORY, mode) as other:
            with pytest.raises(MCPError) as refused:
                await tasks.get_task(other, created["taskId"])
            theirs = await listed(other)
        return answer, mine, theirs, created["taskId"], str(refused.value)

    answer, mine, theirs, task_id, refusal = anyio.run(scenario)
    assert not answer.is_error and answer.structured_content["status"] == "COMPLETED"
    if mode == "legacy":
        assert task_id in mine and task_id not in theirs
    else:
        assert mine == theirs == -32601
    assert "no task" in refusal


@pytest.mark.parametrize("mode", MODES)
def test_a_refused_call_as_a_task_ends_with_the_same_refusal(server: RunningServer, mode: str):
    async def scenario() -> Any:
        async with agent(server, ALICE, mode) as client:
            missing = "00000000-0000-0000-0000-000000000000"
            created = await tasks.call_as_task(client, "commit_saga", {"saga_id": missing})
            return await tasks.task_result(client, created["taskId"])

    answer = anyio.run(scenario)
    assert answer.is_error
    assert answer.structured_content["error"]["code"] == "SAGA_NOT_FOUND"


def test_a_task_is_finished_and_its_result_fetched_from_another_server_process(tmp_path: Path):
    (tmp_path / "first").mkdir()
    (tmp_path / "second").mkdir()
    first = start_server(tmp_path / "first")

    async def create() -> tuple[str, str]:
        async with agent(first, ALICE, "legacy") as client:
            saga_id, gate_id = await _gated_saga(client)
            created = await tasks.call_as_task(client, "run_ready_steps", {"saga_id": saga_id})
            await _until_waiting(client, created["taskId"])
            return created["taskId"], gate_id

    try:
        task_id, gate_id = anyio.run(create)
    finally:
        first.proc.terminate()
        first.proc.wait(timeout=30)
    _approve_in_console(gate_id)
    second = start_server(tmp_path / "second")

    async def fetch() -> Any:
        async with agent(second, ALICE, "legacy") as client:
            return await tasks.task_result(client, task_id)

    try:
        answer = anyio.run(fetch)
    finally:
        second.proc.terminate()
        second.proc.wait(timeout=30)
    assert not answer.is_error
    assert [node["status"] for node in answer.structured_content["workflow"]["nodes"]] == ["COMPLETED", "COMPLETED"]


async def _chain_of_three(client: Client) -> str:
    saga = await call(client, "begin_saga", {"metadata": {}})
    for key, after in (("a", []), ("b", ["a"]), ("c", ["b"])):
        node = {"saga_id": saga["id"], "action": "noop", "input": {}, "key": key, "depends_on": after}
        await call(client, "plan_saga_step", node)
    return str(saga["id"])


async def _run_with_progress(server: RunningServer, client: Client, saga_id: str) -> list[dict[str, Any]]:
    """run_ready_steps with a progress token; the notifications/progress params that arrived during the call."""
    if not tasks.modern(client):
        seen: list[dict[str, Any]] = []

        async def progress(done: float, total: float | None, message: str | None) -> None:
            seen.append({"progress": done, "total": total, "message": message})

        await client.call_tool("run_ready_steps", {"saga_id": saga_id}, progress_callback=progress)
        return seen
    # The mcp 2.3 client sends no progress token in the 2026-07-28 era, so this request is written by hand.
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "progress-test", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {},
        "progressToken": "run-1",
    }
    body = {"saga_id": saga_id}
    request = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "run_ready_steps", "arguments": body, "_meta": meta},
    }
    headers = {
        "Authorization": f"Bearer {ALICE}",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": "2026-07-28",
        "Mcp-Method": "tools/call",
        "Mcp-Name": "run_ready_steps",
    }
    async with httpx2.AsyncClient(timeout=120) as http:
        answer = await http.post(server.mcp_url, json=request, headers=headers)
    assert answer.status_code == 200, answer.text
    events = [json.loads(line[5:]) for line in answer.text.splitlines() if line.startswith("data:")]
    assert "result" in events[-1], events[-1]
    return [event["params"] for event in events if event.get("method") == "notifications/progress"]


@pytest.mark.parametrize("mode", MODES)
def test_a_blocking_run_with_a_progress_token_reports_progress(server: RunningServer, mode: str):
    async def scenario() -> list[dict[str, Any]]:
        async with agent(server, ALICE, mode) as client:
            return await _run_with_progress(server, client, await _chain_of_three(client))

    seen = anyio.run(scenario)
    assert seen, "no notifications/progress arrived"
    done = [note["progress"] for note in seen]
    assert done == sorted(set(done)), f"progress must increase with every notification: {seen}"
    assert seen[-1]["progress"] == 3 and seen[-1]["total"] == 3
    assert "3 of 3 nodes completed" in seen[-1]["message"]


@pytest.mark.parametrize("mode", MODES)
def test_a_client_without_tasks_gets_the_answer_inline(server: RunningServer, mode: str):
    from tests.protocols.mcp_client import connect

    async def scenario() -> dict[str, Any]:
        async with connect(server.mcp_url, ALICE, mode) as client:
            saga = await call(client, "begin_saga", {"metadata": {}})
            await call(client, "plan_saga_step", {"saga_id": saga["id"], "action": "noop", "input": {}})
            return await call(client, "run_ready_steps", {"saga_id": saga["id"]})

    answer = anyio.run(scenario)
    assert answer["run"]["settled"] and answer["run"]["node_counts"] == {"COMPLETED": 1}


def test_a_2025_client_is_told_each_status_of_its_task(server: RunningServer):
    notes: list[dict[str, Any]] = []

    async def scenario() -> str:
        async with agent(server, ALICE, "legacy", notes) as client:
            saga_id, gate_id = await _gated_saga(client)
            created = await tasks.call_as_task(client, "run_ready_steps", {"saga_id": saga_id})
            await _until_waiting(client, created["taskId"])
            await _in_thread(lambda: _approve_in_console(gate_id))
            await tasks.task_result(client, created["taskId"])
            with anyio.fail_after(30):
                while "completed" not in _statuses(notes, created["taskId"]):
                    await anyio.sleep(0.1)
            return str(created["taskId"])

    task_id = anyio.run(scenario)
    statuses = _statuses(notes, task_id)
    # The session stream carries no replay: a status sent before the client's GET stream opened is lost (the
    # client polls tasks/get anyway), so only what follows the approval is certain to arrive.
    assert statuses[-1] == "completed" and set(statuses) <= {"working", "input_required", "completed"}, statuses


def _statuses(notes: list[dict[str, Any]], task_id: str) -> list[str]:
    return [note["status"] for note in notes if note["taskId"] == task_id]
