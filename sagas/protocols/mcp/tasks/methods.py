"""The tasks/* requests, served on an SDK low-level Server: `serve_tasks(server, tasks, principal_for_request)`.

Both eras: tasks/get (2026-07-28: the result or error inlined once terminal), tasks/cancel (2025-11-25: the
cancelled Task; 2026-07-28: an empty acknowledgement), tasks/result (waits until the task ended, then gives the
request's own result) and tasks/list (the caller's tasks, newest first). tasks/result and tasks/list are core in
2025-11-25; the 2026-07-28 extension removed both (a client polls tasks/get), so there they answer -32601.
2026-07-28 adds tasks/update, acknowledged (these tasks never ask the client for input). A 2026-07-28 request
that does not declare the extension gets -32021, as the extension requires.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import mcp.types as types
from mcp.server import Server, ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp.shared.inbound import MCP_NAME_HEADER, decode_header_value
from mcp_types.jsonrpc import HEADER_MISMATCH, INVALID_PARAMS, METHOD_NOT_FOUND
from pydantic import ConfigDict

from governance.identity.principal import Principal
from governance.identity.rbac import READ, can
from sagas.models import McpTask
from sagas.protocols.mcp.tasks import wire
from sagas.protocols.mcp.tasks.negotiation import AnswerWithTask, TaskRequest
from sagas.protocols.mcp.tasks.service import TaskNotCancellable, TaskNotFound, TaskService
from sagas.protocols.mcp.tasks.store import InvalidCursor

MISSING_REQUIRED_CLIENT_CAPABILITY = -32021


class TaskRef(types.RequestParams):
    task_id: str


class TaskUpdate(TaskRef):
    model_config = ConfigDict(extra="allow")  # inputResponses: none is ever outstanding here


def serve_tasks(server: Server[Any], tasks: TaskService, principal_for_request: Callable[[], Principal]) -> None:
    """Serve tasks/* on `server`, and let its tools/call handler answer with a task (negotiation.announce)."""

    def caller(ctx: ServerRequestContext[Any]) -> Principal:
        if wire.is_modern(ctx.protocol_version) and not wire.client_declares_tasks(ctx.meta):
            raise MCPError(
                MISSING_REQUIRED_CLIENT_CAPABILITY,
                f"Missing required client capability: list {wire.EXTENSION} in this request's client capabilities "
                "to use tasks/*.",
                data={"requiredCapabilities": {"extensions": {wire.EXTENSION: {}}}},
            )
        principal = principal_for_request()
        if not can(principal, READ):
            raise MCPError(INVALID_PARAMS, f"{principal.principal_id} may not read tasks; ask for the viewer role.")
        return principal

    async def get(ctx: ServerRequestContext[Any], params: TaskRef) -> dict[str, Any]:
        _named_in_header(ctx, params.task_id)
        with _protocol_errors():
            row = await tasks.get(caller(ctx), params.task_id)
        return wire.detailed(row, ctx.protocol_version)

    async def result(ctx: ServerRequestContext[Any], params: TaskRef) -> dict[str, Any]:
        _legacy_only(ctx, "tasks/result", "poll tasks/get: it inlines the result (or error) once the task ended")
        with _protocol_errors():
            row = await tasks.result(caller(ctx), params.task_id)
        return _final(row, ctx.protocol_version)

    async def listing(ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams) -> dict[str, Any]:
        _legacy_only(ctx, "tasks/list", "keep the taskId each call answered with and poll tasks/get")
        with _protocol_errors():
            rows, following = await tasks.page(caller(ctx), params.cursor)
        page: dict[str, Any] = {"tasks": [wire.task_object(row, ctx.protocol_version) for row in rows]}
        if following:
            page["nextCursor"] = following
        return page

    async def cancel(ctx: ServerRequestContext[Any], params: TaskRef) -> dict[str, Any]:
        _named_in_header(ctx, params.task_id)
        modern = wire.is_modern(ctx.protocol_version)
        try:
            with _protocol_errors():
                row = await tasks.cancel(caller(ctx), params.task_id)
        except TaskNotCancellable as refused:
            if modern:
                return {}  # the extension's cancel is cooperative: acknowledged, the task ends as it will
            raise MCPError(INVALID_PARAMS, str(refused)) from None
        return {} if modern else wire.task_object(row, ctx.protocol_version)

    async def update(ctx: ServerRequestContext[Any], params: TaskUpdate) -> dict[str, Any]:
        _named_in_header(ctx, params.task_id)
        with _protocol_errors():
            await tasks.get(caller(ctx), params.task_id)
        return {}

    server.add_request_handler("tasks/get", TaskRef, get)
    server.add_request_handler("tasks/result", TaskRef, result)
    server.add_request_handler("tasks/list", types.PaginatedRequestParams, listing)
    server.add_request_handler("tasks/cancel", TaskRef, cancel)
    server.add_request_handler("tasks/update", TaskUpdate, update)

    async def settle(wanted: TaskRequest, answer: dict[str, Any]) -> McpTask:
        return await tasks.settled(principal_for_request(), wanted.protocol_version, wanted.ttl_ms, answer)

    server.middleware.append(AnswerWithTask(settle))
    server.extensions[wire.EXTENSION] = {}


def _named_in_header(ctx: ServerRequestContext[Any], task_id: str) -> None:
    """Over 2026-07-28 HTTP, tasks/get, tasks/update and tasks/cancel mirror their taskId in the `Mcp-Name` header
    (SEP-2243, SEP-2663), as tools/call mirrors its tool's name: a header naming another task is refused with -32020
    (HTTP 400). The SDK checks the methods it knows (tools/call, prompts/get, resources/read) before any handler runs;
    the tasks extension's are ours. A request without the header is served: the SDK's own client does not send it for
    tasks/* (its list of name-bearing methods stops at those three), and the id in the body is the one authorized
    anyway. stdio has no headers: nothing to compare."""
    headers = getattr(ctx.request, "headers", None)
    if headers is None or not wire.is_modern(ctx.protocol_version) or MCP_NAME_HEADER not in headers:
        return
    if decode_header_value(headers.get(MCP_NAME_HEADER)) != task_id:
        raise MCPError(
            HEADER_MISMATCH,
            f"The {MCP_NAME_HEADER} header names another task than params.taskId: send the same id in both (or leave "
            f"the header out) with {ctx.method}.",
        )


def _legacy_only(ctx: ServerRequestContext[Any], method: str, instead: str) -> None:
    """tasks/result and tasks/list are core 2025-11-25 methods; the 2026-07-28 extension removed them (-32601)."""
    if wire.is_modern(ctx.protocol_version):
        raise MCPError(METHOD_NOT_FOUND, f"{method} is not part of the {wire.EXTENSION} extension: {instead}.")


def legacy_capability() -> types.ServerTasksCapability:
    """`capabilities.tasks` for 2025-11-25 clients: tools/call may be task-augmented, tasks listed and cancelled."""
    return types.ServerTasksCapability(
        list=types.TasksListCapability(),
        cancel=types.TasksCancelCapability(),
        requests=types.ServerTasksRequestsCapability(
            tools=types.TasksToolsCapability(call=types.TasksCallCapability())
        ),
    )


def _final(row: McpTask, protocol_version: str) -> dict[str, Any]:
    """tasks/result: the request's own result (a cancelled task's says why it did not run), with the related-task
    `_meta`; a failed task's JSON-RPC error is raised as that error."""
    if row.status == "failed" or row.result is None:
        error = row.error or {"code": INVALID_PARAMS, "message": row.status_message or "The task has no result."}
        raise MCPError(int(error.get("code", INVALID_PARAMS)), str(error.get("message", "")), data=error.get("data"))
    result = {**row.result, "_meta": {**(row.result.get("_meta") or {}), **wire.related(row.id)}}
    if not wire.is_modern(protocol_version):
        result.pop("resultType", None)  # 2026-07-28 vocabulary
    return result


@contextlib.contextmanager
def _protocol_errors() -> Iterator[None]:
    """Task lookups that fail are the client's protocol errors (-32602), as the tasks specs say."""
    try:
        yield
    except (TaskNotFound, InvalidCursor) as error:
        raise MCPError(INVALID_PARAMS, str(error)) from None
