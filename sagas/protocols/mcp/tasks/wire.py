"""Tasks on the wire, per protocol era.

2025-11-25 (experimental tasks in the core spec): the client asks by putting `task: {ttl}` in tools/call params;
the answer is `CreateTaskResult {task: Task}`; `tasks/get` and `tasks/cancel` answer a flat Task (`ttl`,
`pollInterval`), `tasks/result` the request's own result, `tasks/list` `{tasks, nextCursor}`.

2026-07-28 (the `io.modelcontextprotocol/tasks` extension, SEP-2663): the client lists the extension in each
request's `_meta` client capabilities and the server decides; the answer is a flat task with `resultType: "task"`
(`ttlMs`, `pollIntervalMs`); `tasks/get` inlines `result` (completed) or `error` (failed); `tasks/cancel` and
`tasks/update` answer an empty acknowledgement. `input_required` there means "answer these inputRequests", which a
task waiting for an operator has none of, so such a task is `working` with its statusMessage saying who it waits
for.
"""

from __future__ import annotations

from typing import Any

from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from sagas.models import McpTask

LEGACY = "2025-11-25"
EXTENSION = "io.modelcontextprotocol/tasks"
RELATED_TASK_META_KEY = "io.modelcontextprotocol/related-task"
CLIENT_CAPABILITIES_META_KEY = "io.modelcontextprotocol/clientCapabilities"


def is_modern(protocol_version: str | None) -> bool:
    return protocol_version in MODERN_PROTOCOL_VERSIONS


def task_object(row: McpTask, protocol_version: str | None) -> dict[str, Any]:
    """The Task as this era spells it."""
    modern = is_modern(protocol_version)
    status = row.status
    if modern and status == "input_required":
        status = "working"  # see the module docstring: nothing is asked of this client
    task: dict[str, Any] = {
        "taskId": row.id,
        "status": status,
        "createdAt": _iso(row.created_at),
        "lastUpdatedAt": _iso(row.updated_at),
        ("ttlMs" if modern else "ttl"): row.ttl_ms,
        ("pollIntervalMs" if modern else "pollInterval"): row.poll_interval_ms,
    }
    if row.status_message:
        task["statusMessage"] = row.status_message
    return task


def created(row: McpTask, protocol_version: str | None, note: dict[str, Any]) -> dict[str, Any]:
    """The answer to the request that created the task. In 2025-11-25 it keeps the `content` of `note` (a
    CallToolResult saying a task was created): Result objects allow extra members, and the mcp 2.3 client checks
    every tools/call answer of that era against CallToolResult, which needs `content`."""
    if is_modern(protocol_version):
        return {**task_object(row, protocol_version), "resultType": "task", "_meta": note.get("_meta") or {}}
    return {"task": task_object(row, protocol_version), "content": note.get("content", [])}


def detailed(row: McpTask, protocol_version: str | None) -> dict[str, Any]:
    """tasks/get: the Task, and in 2026-07-28 its result or error once it has one."""
    task = task_object(row, protocol_version)
    if is_modern(protocol_version):
        if row.status == "completed" and row.result is not None:
            task["result"] = row.result
        if row.status == "failed" and row.error is not None:
            task["error"] = row.error
    return task


def related(task_id: str) -> dict[str, Any]:
    return {RELATED_TASK_META_KEY: {"taskId": task_id}}


def client_declares_tasks(meta: Any) -> bool:
    """Whether a 2026-07-28 request's `_meta` client capabilities list the tasks extension."""
    capabilities = (meta or {}).get(CLIENT_CAPABILITIES_META_KEY) or {}
    return isinstance(capabilities, dict) and EXTENSION in (capabilities.get("extensions") or {})


def _iso(moment: Any) -> str:
    return str(moment.isoformat().replace("+00:00", "Z"))
