"""The MCP surface: the official SDK's low-level Server serving the operation table's tools (sagas.operations).

Transport (Streamable HTTP in both protocol eras, stdio), framing, sessions and version negotiation belong to the
SDK. Identity comes from governance.identity.http (HTTP) or the local process (stdio). Each call: validate the
arguments strictly, then invoke the operation (RBAC, handler) as one ORM unit off the event loop, and answer with
structuredContent (plus the same JSON as text), or with isError and a message written for an LLM. A tool name
that tools/list does not show is a JSON-RPC error (-32602) instead: no tool ran.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

import mcp.types as types
from mcp.server import ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp_types.jsonrpc import INVALID_PARAMS, METHOD_NOT_FOUND
from pydantic import ValidationError

from audit import telemetry
from governance.errors import ServiceError
from governance.identity.principal import Principal
from sagas.operations.arguments import argument_problems
from sagas.operations.invoke import invoke
from sagas.operations.operation import Operation
from sagas.operations.table import MCP_TOOLS
from sagas.protocols.mcp.progress import with_progress
from sagas.protocols.mcp.resources import serve_saga_resources
from sagas.protocols.mcp.resources.capabilities import DeclaringServer
from sagas.protocols.mcp.saga_tasks import SAGA_TOOL, TASK_TOOLS, SagaToolTasks
from sagas.protocols.mcp.tasks.methods import serve_tasks
from sagas.protocols.mcp.tasks.negotiation import requested, status_listener
from sagas.protocols.mcp.tasks.service import TaskService
from sagas.protocols.orm import run_orm

logger = logging.getLogger("sagas.protocols.mcp.server")

SERVER_NAME = "semantic-saga"
SERVER_VERSION = "0.1.0"

INSTRUCTIONS = """Semantic Saga makes side effects safe: every action is a registered, versioned contract, journaled
before it runs, and compensated in reverse order if the workflow unwinds.

Workflow: begin_saga -> plan_saga_step for each action (depends_on for order, approval_required for human gates)
-> approve_saga_step where a node waits for approval -> run_ready_steps (repeat until nothing is ready) ->
commit_saga when every node COMPLETED, or rollback_saga to undo everything done so far.

list_actions shows what you may call and each action's input_schema, risk and reversibility. Refusals are
answered as tool errors that say what happened, what did not run and what to call next; do not work around a
refusal by other means. Keep the saga_id: get_saga shows everything about it."""

PROMPT_NAME = "saga-coordinator"
PROMPT_ARGUMENTS = frozenset({"task"})
PROMPT_TEXT = """You coordinate side effects with Semantic Saga. For the task below:
1. Call list_actions and pick the registered actions you need; never invent action ids.
2. begin_saga with metadata describing the task.
3. plan_saga_step for each action, with depends_on where order matters and a key per node.
4. If a node is WAITING_APPROVAL, stop and ask a human to approve it (approve_saga_step) - do not approve your
   own risky steps unless you were told to.
5. run_ready_steps; repeat while nodes are READY; read the answer's run.in_flight and errors.
6. When every node is COMPLETED, commit_saga. If anything failed and cannot be retried, rollback_saga.
Task: {task}"""


def _error_result(code: str, message: str, **extra: Any) -> types.CallToolResult:
    payload = {"error": {"code": code, "message": message, **extra}}
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=f"{code}: {message}")],
        structured_content=payload,
        is_error=True,
    )


def _ok_result(result: dict[str, Any]) -> types.CallToolResult:
    text = json.dumps(result, ensure_ascii=False, default=str)
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], structured_content=result)


def _invalid_arguments(tool: Operation[Any], error: ValidationError) -> types.CallToolResult:
    problems = [problem.message for problem in argument_problems(error, root="(arguments)")]
    return _error_result(
        "INVALID_ARGUMENTS",
        f"{tool.name} was not called: {'; '.join(problems)}. Nothing was created or changed. Fix the arguments "
        "(tools/list shows the input schema) and call again.",
        problems=problems,
    )


def _unknown_tool(name: str) -> MCPError:
    """A name that is not in tools/list is the client's protocol error (-32602, the spec's tool error section), not
    a tool result: no tool ran, so there is no result to report, whatever the transport."""
    return MCPError(
        INVALID_PARAMS,
        f"Unknown tool {name!r}: nothing was called. Call tools/list for the tools and their input schemas; the tools "
        f"are: {', '.join(MCP_TOOLS)}.",
        data={"tool": name, "available_tools": list(MCP_TOOLS)},
    )


async def call_tool(
    principal: Principal,
    name: str,
    arguments: dict[str, Any] | None,
    ctx: ServerRequestContext[Any] | None = None,
    tasks: TaskService | None = None,
) -> types.CallToolResult:
    """Validate, authorize, run, shape the answer. With `tasks`, a long tool of a client that negotiated tasks is
    answered with a task (sagas.protocols.mcp.saga_tasks); with `ctx`, a long blocking one reports progress."""
    tool = MCP_TOOLS.get(name)
    if tool is None:
        raise _unknown_tool(name)
    try:
        validated = tool.arguments.model_validate(arguments or {})
    except ValidationError as error:
        return _invalid_arguments(tool, error)
    wanted = requested()
    if wanted is not None and wanted.explicit and name not in TASK_TOOLS:
        raise _no_task_support(name)
    try:
        if wanted is not None and tasks is not None and name in TASK_TOOLS:
            listener = status_listener(ctx) if ctx is not None else None
            return await SAGA_TOOL_KIND.defer(tasks, principal, tool, validated, wanted, listener)
        saga_id = str(getattr(validated, "saga_id", ""))
        work = functools.partial(run_orm, invoke, tool, principal, validated)
        return _ok_result(await with_progress(ctx, name, principal, saga_id, work))
    except ServiceError as refusal:
        return _refused_result(refusal)
    except Exception as exc:  # a bug or an outage: say so without leaking internals
        logger.exception("tool %s failed unexpectedly", name)
        return _error_result(
            "INTERNAL_ERROR",
            f"{name} failed unexpectedly ({type(exc).__name__}). Read the saga (get_saga) before retrying: the "
            "call may or may not have changed it.",
        )


def _no_task_support(name: str) -> MCPError:
    """A 2025-11-25 client asked for a task from a tool whose `execution.taskSupport` is absent (forbidden): the
    spec's answer is -32601. Nothing ran."""
    return MCPError(
        METHOD_NOT_FOUND,
        f"Tool {name!r} does not support tasks (tools/list declares execution.taskSupport only on "
        f"{', '.join(sorted(TASK_TOOLS))}): nothing was called. Call it without `task` for its answer at once.",
    )


def _refused_result(refusal: ServiceError) -> types.CallToolResult:
    return _error_result(refusal.code, refusal.message, **_jsonable(refusal.extra))


# Long tools of a task-negotiating client end with exactly the answers a blocking call gives.
SAGA_TOOL_KIND = SagaToolTasks(_ok_result, _refused_result)


def _jsonable(extra: dict[str, Any]) -> dict[str, Any]:
    plain: dict[str, Any] = json.loads(json.dumps(extra, default=str))
    return plain


@functools.cache
def tool_list() -> list[types.Tool]:
    """The tools, built once: MCP_TOOLS is a constant table, and pydantic's schema generation is the costly part of
    every tools/list (and of the 2026-07-28 parameter check, which would otherwise list tools on each call)."""
    return [
        types.Tool(
            name=tool.name,
            description=tool.description,
            input_schema=_input_schema(tool),
            output_schema=tool.output.schema,
            annotations=types.ToolAnnotations(
                read_only_hint=tool.hints.read_only,
                destructive_hint=tool.hints.destructive,
                idempotent_hint=tool.hints.idempotent,
                open_world_hint=tool.hints.open_world,
            ),
            # The tools whose work can wait (a run, an execution, a rollback, a commit) may be answered by a task;
            # every other tool answers at once, and a client asking one for a task is refused (call_tool).
            execution=types.ToolExecution(task_support="optional") if tool.name in TASK_TOOLS else None,
        )
        for tool in MCP_TOOLS.values()
    ]


@functools.cache
def _input_schemas() -> dict[str, dict[str, Any]]:
    return {tool.name: tool.input_schema for tool in tool_list()}


def tool_input_schema(name: str) -> dict[str, Any] | None:
    """The SDK's `get_tool_input_schema` hook: used instead of running the tools/list handler per tools/call."""
    return _input_schemas().get(name)


def _input_schema(tool: Operation[Any]) -> dict[str, Any]:
    schema: dict[str, Any] = tool.arguments.model_json_schema()
    schema.pop("title", None)
    schema["additionalProperties"] = False
    return schema


def build_server(principal_for_request: Any) -> SagaServer:
    """The SDK server; `principal_for_request()` returns the Principal of the request being served."""

    async def list_tools(ctx: ServerRequestContext[Any], params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=list(tool_list()))

    async def handle_call(ctx: ServerRequestContext[Any], params: types.CallToolRequestParams) -> types.CallToolResult:
        # The client's trace context in params._meta (preferred over HTTP headers) continues through the call.
        meta = dict(params.meta) if params.meta else None
        with telemetry.attached(meta), telemetry.span("mcp.tools/call", tool=params.name):
            return await call_tool(principal_for_request(), params.name, params.arguments, ctx, server.tasks)

    async def list_prompts(ctx: ServerRequestContext[Any], params: Any) -> types.ListPromptsResult:
        argument = types.PromptArgument(name="task", description="What the agent must get done.", required=True)
        prompt = types.Prompt(
            name=PROMPT_NAME,
            description="How to run a task as a saga: plan, approve, run, commit or roll back.",
            arguments=[argument],
        )
        return types.ListPromptsResult(prompts=[prompt])

    async def get_prompt(ctx: ServerRequestContext[Any], params: types.GetPromptRequestParams) -> types.GetPromptResult:
        # Unlike a tool refusal (answered in-band for the model), a bad prompt request is the client's protocol
        # error: -32602 as the spec's error table says.
        if params.name != PROMPT_NAME:
            raise MCPError(INVALID_PARAMS, f"Unknown prompt {params.name!r}; prompts/list shows {PROMPT_NAME!r}.")
        task = (params.arguments or {}).get("task")
        if not task:
            raise MCPError(INVALID_PARAMS, f"Prompt {PROMPT_NAME!r} needs the argument 'task'.")
        message = types.PromptMessage(
            role="user", content=types.TextContent(type="text", text=PROMPT_TEXT.format(task=task))
        )
        return types.GetPromptResult(description="Run a task as a saga.", messages=[message])

    server = SagaServer(
        SERVER_NAME,
        version=SERVER_VERSION,
        title="Semantic Saga",
        instructions=INSTRUCTIONS,
        on_list_tools=list_tools,
        get_tool_input_schema=tool_input_schema,
        on_call_tool=handle_call,
        on_list_prompts=list_prompts,
        on_get_prompt=get_prompt,
    )
    server.resources_running = serve_saga_resources(server, principal_for_request, {PROMPT_NAME: PROMPT_ARGUMENTS})
    server.tasks = TaskService({SAGA_TOOL: SAGA_TOOL_KIND})
    serve_tasks(server, server.tasks, principal_for_request)
    return server


class SagaServer(DeclaringServer):
    """The SDK server plus what must run beside it for its lifetime (`async with server.running():`)."""

    resources_running: Callable[[], contextlib.AbstractAsyncContextManager[None]]
    tasks: TaskService  # long tools answered as MCP tasks, driven in the background while running
    tasks_served = True

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        async with self.tasks.running(), self.resources_running():
            yield
