"""The agent's side of MCP tasks, on the official `mcp` client (2.3): a task-augmented tools/call and tasks/*.

2026-07-28: the client lists the `io.modelcontextprotocol/tasks` extension (a ClientExtension with a ResultClaim for
`resultType: "task"`), so every request carries it in its client capabilities; `client.session.call_tool(...,
allow_claimed=True)` hands back the task handle, and `client.call_tool` resolves it by polling tasks/get.
2025-11-25: the SDK's call_tool has no `task` parameter, so the request is sent with `client.session.send_request`
and the SDK's own task types (mcp_types, "2025-11-25 only").
"""

from __future__ import annotations

from typing import Any, Literal

import anyio
import mcp.types as types
from mcp import Client
from mcp.client.extension import ClaimContext, ClientExtension, ResultClaim
from mcp.shared.exceptions import MCPError
from pydantic import BaseModel, ConfigDict

EXTENSION = "io.modelcontextprotocol/tasks"
TERMINAL = ("completed", "failed", "cancelled")
WAIT_SECONDS = 60


class Answer(BaseModel):
    """Any JSON-RPC result, every member kept."""

    model_config = ConfigDict(extra="allow")

    def fields(self) -> dict[str, Any]:
        return dict(self.model_extra or {})


class CreatedTask(types.Result):
    """The 2026-07-28 task handle (a flat Task with resultType "task")."""

    model_config = ConfigDict(extra="allow")
    result_type: Literal["task"] = "task"
    task_id: str
    status: str
    status_message: str | None = None


# tasks/* carry the task id in the Mcp-Name header (SEP-2663).
class GetTask(types.GetTaskRequest):
    name_param = "taskId"


class CancelTask(types.CancelTaskRequest):
    name_param = "taskId"


class TaskResult(types.GetTaskPayloadRequest):
    name_param = "taskId"


async def _resolve(handle: CreatedTask, context: ClaimContext) -> types.CallToolResult:
    """What `client.call_tool` does with a task handle: poll tasks/get until the task ended, then its result."""
    with anyio.fail_after(WAIT_SECONDS):
        while True:
            task = await _send(context.session, GetTask(params=types.GetTaskRequestParams(task_id=handle.task_id)))
            if task["status"] in TERMINAL:
                return types.CallToolResult.model_validate(task.get("result") or {"content": [], "isError": True})
            await anyio.sleep(0.2)


class Tasks(ClientExtension):
    identifier = EXTENSION

    def claims(self) -> list[ResultClaim[Any]]:
        return [ResultClaim(result_type="task", model=CreatedTask, resolve=_resolve)]


def modern(client: Client) -> bool:
    return client.protocol_version == "2026-07-28"


async def call_as_task(client: Client, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """tools/call, accepting a task: the Task the server answered with (fails if it answered otherwise)."""
    if modern(client):
        handle = await client.session.call_tool(name, arguments, allow_claimed=True)
        assert isinstance(handle, CreatedTask), f"expected a task, got {handle!r}"
        return handle.model_dump(by_alias=True, exclude_none=True)
    params = types.CallToolRequestParams(name=name, arguments=arguments, task=types.TaskMetadata(ttl=600_000))
    created = await _send(client.session, types.CallToolRequest(params=params))
    assert "task" in created, f"expected a CreateTaskResult, got {created!r}"
    return dict(created["task"])


async def get_task(client: Client, task_id: str) -> dict[str, Any]:
    return await _send(client.session, GetTask(params=types.GetTaskRequestParams(task_id=task_id)))


async def task_result(client: Client, task_id: str) -> types.CallToolResult:
    """tasks/result (it waits until the task ended); 2026-07-28 removed it, so there tasks/get is polled until it
    inlines the result."""
    if modern(client):
        task = await wait_until_ended(client, task_id)
        if task["status"] == "failed":
            raise MCPError(int(task["error"]["code"]), str(task["error"]["message"]))
        return types.CallToolResult.model_validate(task["result"])
    request = TaskResult(params=types.GetTaskPayloadRequestParams(task_id=task_id))
    with anyio.fail_after(WAIT_SECONDS):
        return await client.session.send_request(request, types.CallToolResult)


async def list_tasks(client: Client) -> list[dict[str, Any]]:
    """tasks/list: 2025-11-25 only (the 2026-07-28 extension answers -32601)."""
    return list((await _send(client.session, types.ListTasksRequest()))["tasks"])


async def cancel_task(client: Client, task_id: str) -> dict[str, Any]:
    return await _send(client.session, CancelTask(params=types.CancelTaskRequestParams(task_id=task_id)))


async def wait_until_ended(client: Client, task_id: str) -> dict[str, Any]:
    with anyio.fail_after(WAIT_SECONDS):
        while (task := await get_task(client, task_id))["status"] not in TERMINAL:
            await anyio.sleep(0.2)
    return task


async def _send(session: Any, request: types.Request[Any, Any]) -> dict[str, Any]:
    answer: Answer = await session.send_request(request, Answer)
    return answer.fields()
