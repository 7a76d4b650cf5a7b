"""Long saga tools as MCP tasks: run_ready_steps, execute_saga_step, rollback_saga and commit_saga, called by a
client that negotiated tasks, are answered at once with a task that is durable before it is returned
(sagas.protocols.mcp.tasks), and the work goes on in whichever server process drives the task.

The task row (kind `saga.tool`) keeps the tool and its validated arguments, so any process can finish it:

    run_ready_steps   the run is started once (`run_started`), then followed through get_saga_run until it settles.
                      A node WAITING_APPROVAL makes the task `input_required` (2026-07-28: `working`) with a message
                      naming the node, its action and who may decide; once it is decided (console, REST,
                      approve_saga_step) the run goes on, so the task ends when the saga's work does.
                      tasks/cancel stops scheduling (stop_saga_run): attempts in flight are never interrupted, and
                      the cancel says so.
    the others        one call, made once (`attempted`). A process that takes the task over after another stopped
                      mid-call does not repeat it (an action may have run): it answers with the saga as it stands and
                      says that the outcome must be read there. They cannot be cancelled once started.

The answer a task ends with is exactly what the blocking call would have answered (a refusal is an isError result).
"""

from __future__ import annotations

from typing import Any

import anyio
import mcp.types as types
from django.conf import settings

from governance.errors import ServiceError
from governance.identity.principal import Principal
from sagas.models import McpTask
from sagas.operations.invoke import invoke
from sagas.operations.operation import Operation
from sagas.operations.table import MCP_TOOLS, OPERATIONS
from sagas.protocols.mcp.tasks import store
from sagas.protocols.mcp.tasks.negotiation import TaskRequest, announce
from sagas.protocols.mcp.tasks.service import (
    POLL_INTERVAL_MS,
    POLL_SECONDS,
    Finish,
    Listener,
    Note,
    TaskService,
    ttl_for,
)
from sagas.protocols.mcp.tasks.store import NewTask
from sagas.protocols.orm import run_orm

SAGA_TOOL = "saga.tool"
RUN = "run_ready_steps"
# trigger_rollback is rollback_saga under the seed's name: the same wait, the same task.
TASK_TOOLS = frozenset({RUN, "execute_saga_step", "rollback_saga", "trigger_rollback", "commit_saga"})
# The first run call waits at most this long before the task follows the run by reading it: short, so a cancel or
# a decision is noticed promptly and no ORM thread is held for the run's whole length.
FIRST_WAIT_SECONDS = 2.0
WAITING = "WAITING_APPROVAL"
WAITING_POLL_MAX_SECONDS = 4.0

Shape = Any  # the MCP surface's answer builders: (dict) -> CallToolResult, and (ServiceError) -> CallToolResult


class SagaToolTasks:
    """The `saga.tool` task kind; `ok` and `refused` shape answers exactly as the blocking tools/call does."""

    def __init__(self, ok: Shape, refused: Shape) -> None:
        self.ok = ok
        self.refused = refused

    async def defer(
        self,
        tasks: TaskService,
        principal: Principal,
        tool: Operation[Any],
        arguments: Any,
        wanted: TaskRequest,
        listener: Listener | None = None,
    ) -> types.CallToolResult:
        """Answer this call with a task (its handle replaces this answer on the wire)."""
        new = NewTask(
            kind=SAGA_TOOL,
            protocol_version=wanted.protocol_version,
            status="working",
            status_message=f"{tool.name} accepted, running in the background",
            request={"tool": tool.name, "arguments": arguments.model_dump(mode="json")},
            ttl_ms=ttl_for(wanted.ttl_ms, at_least_ms=0),
            poll_interval_ms=POLL_INTERVAL_MS,
            saga_id=str(arguments.saga_id),
        )
        return announce(await tasks.create(principal, new, listener))

    async def drive(self, task: McpTask, principal: Principal, note: Note) -> Finish:
        request = dict(task.request)
        if request["tool"] == RUN:
            try:
                return await _RunFollower(self, task, principal, note, request).follow()
            except _Refused as refused:  # the run could not be (re)started: the task ends with that refusal
                return Finish(
                    "completed",
                    f"{RUN} was refused: {refused.refusal.code}.",
                    result=_dump(self.refused(refused.refusal)),
                )
        if request.get("attempted"):
            return await self._taken_over(principal, request)
        await run_orm(store.task_remember, task.id, {**request, "attempted": True})
        return await self._answer(request["tool"], principal, request["arguments"])

    async def cancel(self, task: McpTask, principal: Principal) -> Finish | str:
        tool = task.request["tool"]
        if tool != RUN:
            return (
                f"Cannot cancel task {task.id}: {tool} is one call, already under way, and a side effect in progress "
                "is not interrupted. The task ends with its answer; tasks/result gives it."
            )
        try:
            stopped = await _op("stop_saga_run", principal, {"saga_id": task.saga_id})
        except ServiceError as refusal:
            return f"Cannot cancel task {task.id}: {refusal.message}"
        in_flight = stopped["run"]["in_flight"]
        message = "cancelled: no further step of this run is scheduled"
        if in_flight:
            keys = ", ".join(node["key"] or node["node_id"] for node in in_flight)
            message += (
                f"; {len(in_flight)} attempt(s) already running ({keys}) were not interrupted and end as they will. "
                "Read the saga (get_saga) for their outcome"
            )
        return Finish("cancelled", message + ".", result=_dump(self.ok(stopped)))

    async def _answer(self, tool: str, principal: Principal, arguments: dict[str, Any]) -> Finish:
        try:
            answer = self.ok(await _op(tool, principal, arguments))
            return Finish("completed", f"{tool} answered.", result=_dump(answer))
        except ServiceError as refusal:
            return Finish("completed", f"{tool} was refused: {refusal.code}.", result=_dump(self.refused(refusal)))

    async def _taken_over(self, principal: Principal, request: dict[str, Any]) -> Finish:
        """The process that made this call stopped before recording its answer: never call it twice."""
        tool = request["tool"]
        saga_id = request["arguments"]["saga_id"]
        saga = await _op("get_saga", principal, {"saga_id": saga_id})
        refusal = ServiceError(
            code="OUTCOME_UNKNOWN",
            message=(
                f"The server process running {tool} for saga {saga_id} stopped before it recorded the answer, so "
                f"the call's outcome is not known here; it was not repeated. The saga is {saga['status']} now: read "
                "it with get_saga (each step's status says what ran; an attempt cut short is recovered by the "
                "coordinator) before calling again."
            ),
        )
        return Finish("completed", f"{tool}: outcome unknown after a server stop.", result=_dump(self.refused(refusal)))


class _RunFollower:
    """One run_ready_steps task followed to its end (see the module docstring)."""

    def __init__(self, kind: SagaToolTasks, task: McpTask, principal: Principal, note: Note, request: dict[str, Any]):
        self.kind, self.task, self.principal, self.note, self.request = kind, task, principal, note, request
        self.arguments = dict(request["arguments"])
        self.said = ""

    async def follow(self) -> Finish:
        answer = await self._start() if not self.request.get("run_started") else await self._read()
        pause = POLL_SECONDS
        while True:
            if await self._ended_elsewhere():
                return Finish("cancelled", "cancelled")  # tasks/cancel finished the row; this result is not used
            run, waiting = answer["run"], _waiting(answer)
            if waiting and not run["in_flight"]:
                await self._remember(awaiting=[node["id"] for node in waiting])
                await self._say("input_required", _waiting_message(answer, waiting))
                # A person may take hours: look less often the longer nothing changes (a decision is still
                # noticed within WAITING_POLL_MAX_SECONDS), so many waiting tasks cost little.
                pause = min(pause * 2, WAITING_POLL_MAX_SECONDS)
            elif self._decided(answer):
                answer = await self._start()  # an approval was decided: the run goes on, with a fresh budget
                pause = POLL_SECONDS
                continue
            elif run["settled"]:
                return Finish("completed", _finished_message(answer), result=_dump(self.kind.ok(answer)))
            else:
                await self._say("working", progress_message(answer))
                pause = POLL_SECONDS
            await anyio.sleep(pause)
            answer = await self._read()

    async def _start(self) -> dict[str, Any]:
        await self._remember(run_started=True, awaiting=[])
        try:
            return await _op(RUN, self.principal, {**self.arguments, "wait_seconds": FIRST_WAIT_SECONDS})
        except ServiceError as refusal:
            raise _Refused(refusal) from None

    async def _read(self) -> dict[str, Any]:
        return await _op("get_saga_run", self.principal, self.arguments)

    def _decided(self, answer: dict[str, Any]) -> bool:
        """A node this task waited for is no longer waiting, and the saga can still run."""
        awaited = set(self.request.get("awaiting") or ())
        if not awaited or answer["status"] != "ACTIVE":
            return False
        return any(node["id"] in awaited and node["status"] != WAITING for node in _nodes(answer))

    async def _remember(self, **facts: Any) -> None:
        if all(self.request.get(key) == value for key, value in facts.items()):
            return
        self.request.update(facts)
        await run_orm(store.task_remember, self.task.id, self.request)

    async def _say(self, status: str, message: str) -> None:
        if message != self.said:
            self.said = message
            await self.note(status, message)

    async def _ended_elsewhere(self) -> bool:
        row = await run_orm(store.task_by_id, self.task.id)
        return row.status in store.TERMINAL


class _Refused(Exception):
    def __init__(self, refusal: ServiceError) -> None:
        self.refusal = refusal


async def _op(name: str, principal: Principal, arguments: dict[str, Any]) -> dict[str, Any]:
    operation = OPERATIONS.get(name) or MCP_TOOLS[name]
    validated = operation.arguments.model_validate(arguments)
    answer: dict[str, Any] = await run_orm(invoke, operation, principal, validated)
    return answer


def _nodes(answer: dict[str, Any]) -> list[dict[str, Any]]:
    nodes: list[dict[str, Any]] = (answer.get("workflow") or {}).get("nodes") or []
    return nodes


def _waiting(answer: dict[str, Any]) -> list[dict[str, Any]]:
    if answer["status"] != "ACTIVE":
        return []
    return [node for node in _nodes(answer) if node["status"] == WAITING]


def _waiting_message(answer: dict[str, Any], waiting: list[dict[str, Any]]) -> str:
    names = "; ".join(f"node {node['key'] or node['id']} ({node['id']}, action {node['action']})" for node in waiting)
    duty = (
        " other than whoever planned it (separation of duties)" if settings.SAGA_APPROVAL_SEPARATION_OF_DUTIES else ""
    )
    return (
        f"Waiting for an approval decision on {names} of saga {answer['id']}. An operator of tenant "
        f"{answer.get('tenant_id', 'this tenant')}{duty} decides it in the console (Approvals), through the REST "
        "API (POST /api/v1/sagas/<saga>/nodes/<node>/approve/), or with approve_saga_step. The run goes on once it "
        "is approved; a rejection ends this task with the saga in RECOVERY_REQUIRED."
    )


def progress_message(answer: dict[str, Any]) -> str:
    """`done of planned nodes completed, wave W; running: ...` for a saga's workflow."""
    nodes = _nodes(answer)
    done = sum(1 for node in nodes if node["status"] == "COMPLETED")
    running = [node["key"] or node["id"] for node in nodes if node["status"] == "EXECUTING"]
    text = f"{done} of {len(nodes)} nodes completed, wave {current_wave(nodes)}"
    return text + (f"; running: {', '.join(running)}" if running else "")


def current_wave(nodes: list[dict[str, Any]]) -> int:
    """The dependency depth (1 = no dependencies) of the shallowest node not completed yet; the deepest wave + 1
    once every node completed."""
    depth: dict[str, int] = {}
    by_id = {node["id"]: node for node in nodes}

    def depth_of(node_id: str) -> int:
        if node_id not in depth:
            parents = [parent for parent in by_id[node_id]["depends_on"] if parent in by_id]
            depth[node_id] = 1 + max((depth_of(parent) for parent in parents), default=0)
        return depth[node_id]

    open_depths = [depth_of(node["id"]) for node in nodes if node["status"] != "COMPLETED"]
    if open_depths:
        return min(open_depths)
    return 1 + max((depth_of(node["id"]) for node in nodes), default=0)


def _finished_message(answer: dict[str, Any]) -> str:
    run = answer["run"]
    return f"run ended: {run['stopped_because']}; saga {answer['status']}; {progress_message(answer)}."


def _dump(result: types.CallToolResult) -> dict[str, Any]:
    dumped: dict[str, Any] = result.model_dump(mode="json", by_alias=True, exclude_none=True)
    return dumped
