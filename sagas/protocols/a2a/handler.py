"""The A2A request handler: the SDK's DefaultRequestHandler, with what Semantic Saga keeps durable.

The SDK's streams come from an in-memory queue of the process that runs the task, and its default handler lets a
message name any task. Here:
- a message naming a task continues it only when the task is INPUT_REQUIRED and the message is the `approve` of its
  gate (sagas.protocols.a2a.continuation); any other message to an existing task keeps the -32004 refusal;
- GetTask, ListTasks and SubscribeToTask first bring a waiting task up to date with its saga (an operator may have
  decided in the console or through REST), on whichever replica serves them;
- SendStreamingMessage and SubscribeToTask read their events from the task rows, polled every POLL_SECONDS: any
  replica serves them and a reconnect to another process resumes with the task as it stands, then its changes up
  to the terminal (or the next INPUT_REQUIRED) state, where the stream ends. A stream lasts at most
  STREAM_MAX_SECONDS; the peer subscribes again. Events are snapshots: changes within one poll interval coalesce.
- CancelTask always answers "not cancelable".
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import AsyncGenerator
from typing import Any

from a2a.server.agent_execution.active_task import INTERRUPTED_TASK_STATES, TERMINAL_TASK_STATES
from a2a.server.context import ServerCallContext
from a2a.server.events import Event
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.request_handlers.request_handler import validate_request_params
from a2a.types.a2a_pb2 import (
    CancelTaskRequest,
    GetTaskRequest,
    ListTasksRequest,
    ListTasksResponse,
    Message,
    SendMessageRequest,
    SubscribeToTaskRequest,
    Task,
    TaskArtifactUpdateEvent,
    TaskState,
    TaskStatusUpdateEvent,
)
from a2a.utils.errors import (
    InvalidParamsError,
    PushNotificationNotSupportedError,
    TaskNotCancelableError,
    TaskNotFoundError,
    UnsupportedOperationError,
)
from a2a.utils.task import apply_history_length, validate_history_length

from sagas.protocols.a2a.commands import CANCEL_REFUSAL, parse_command
from sagas.protocols.a2a.continuation import Continuation, approve_by_message, continue_run, refresh, take_over_stale
from sagas.protocols.a2a.gates import approve_command, public, task_gate
from sagas.protocols.a2a.task_store import DjangoTaskStore, principal_of
from sagas.protocols.orm import run_orm

logger = logging.getLogger("sagas.protocols.a2a.commands")

POLL_SECONDS = 0.5
STREAM_MAX_SECONDS = 600.0
# A blocking message that continues a run waits this long for it (run's own wait is at most 300 s).
CONTINUE_WAIT_SECONDS = 330.0
# The SDK parks an INPUT_REQUIRED task's in-memory ActiveTask; nothing here uses it afterwards, so it goes soon.
INTERRUPTED_RELEASE_SECONDS = 5.0
INPUT_REQUIRED = TaskState.TASK_STATE_INPUT_REQUIRED
SETTLED = TERMINAL_TASK_STATES | INTERRUPTED_TASK_STATES

TASK_NOT_CONTINUED = (
    "Task {task_id} takes no further messages: every Semantic Saga command runs as a task of its own, answered once "
    "(a running one is never interrupted); only a task waiting for an approval (INPUT_REQUIRED) takes one more, the "
    "approve command its status message shows. Nothing was created. Send the next command as a new message without "
    "taskId (keep its contextId to group related tasks); GetTask reads task {task_id}."
)


class SagaRequestHandler(DefaultRequestHandler):
    def __init__(self, *, task_store: DjangoTaskStore, **kwargs: Any) -> None:
        super().__init__(task_store=task_store, interrupted_task_timeout=INTERRUPTED_RELEASE_SECONDS, **kwargs)
        self._rows = task_store
        self._continuations: set[asyncio.Task[None]] = set()

    async def aclose(self) -> None:
        await super().aclose()
        if self._continuations:  # each is a bounded run; let it settle its task rather than leave it WORKING
            await asyncio.gather(*self._continuations, return_exceptions=True)

    @validate_request_params
    async def on_cancel_task(self, params: CancelTaskRequest, context: ServerCallContext) -> Task | None:
        # The SDK's cancel would interrupt a running command (or mark it FAILED); a side effect must never stop
        # halfway, so every task answers "not cancelable" and the peer is pointed at rollback.
        if await self._rows.get(params.id, context) is None:
            raise TaskNotFoundError
        raise TaskNotCancelableError(message=CANCEL_REFUSAL.format(task_id=params.id))

    @validate_request_params
    async def on_get_task(self, params: GetTaskRequest, context: ServerCallContext) -> Task | None:
        validate_history_length(params)
        task = await self._current(params.id, context)
        if task is None:
            raise TaskNotFoundError
        return apply_history_length(task, params)

    @validate_request_params
    async def on_list_tasks(self, params: ListTasksRequest, context: ServerCallContext) -> ListTasksResponse:
        page: ListTasksResponse = await super().on_list_tasks(params, context)
        waiting = [task.id for task in page.tasks if task.status.state == INPUT_REQUIRED]
        if not waiting:
            return page
        for task_id in waiting:
            await self._refresh(task_id, context)
        listed: ListTasksResponse = await super().on_list_tasks(params, context)  # as they are now
        return listed

    @validate_request_params
    async def on_message_send(self, params: SendMessageRequest, context: ServerCallContext) -> Message | Task:
        _refuse_push_config(params)
        if params.message.task_id:
            task = await self._continue(params, context)
            if not params.configuration.return_immediately:
                task = await self._settled(task, context)
            return apply_history_length(task, params.configuration)
        result = await super().on_message_send(params, context)
        return public(result) if isinstance(result, Task) else result

    @validate_request_params
    async def on_message_send_stream(
        self, params: SendMessageRequest, context: ServerCallContext
    ) -> AsyncGenerator[Event, None]:
        _refuse_push_config(params)
        if params.message.task_id:
            first: Message | Task = await self._continue(params, context)
        else:
            # The command starts as with returnImmediately; what follows is read from its row, not from the queue.
            started = SendMessageRequest()
            started.CopyFrom(params)
            started.configuration.return_immediately = True
            first = await super().on_message_send(started, context)
        if isinstance(first, Message):
            yield first
            return
        async for event in self._follow(public(first), context, end_if_settled=True):
            yield event

    @validate_request_params
    async def on_subscribe_to_task(
        self, params: SubscribeToTaskRequest, context: ServerCallContext
    ) -> AsyncGenerator[Event, None]:
        task = await self._current(params.id, context)
        if task is None:
            raise TaskNotFoundError
        if task.status.state in TERMINAL_TASK_STATES:
            raise UnsupportedOperationError(
                message=f"Task {params.id} is in terminal state {TaskState.Name(task.status.state)}: nothing more "
                "will happen to it. GetTask reads it."
            )
        async for event in self._follow(task, context, end_if_settled=False):
            yield event

    # --- durable state ----------------------------------------------------------------------------------------------

    async def _current(self, task_id: str, context: ServerCallContext) -> Task | None:
        task = await self._rows.get(task_id, context)
        if task is not None and task.status.state == INPUT_REQUIRED:
            await self._refresh(task_id, context)
            task = await self._rows.get(task_id, context)
        elif task is not None and task.status.state == TaskState.TASK_STATE_WORKING:
            job = await run_orm(take_over_stale, principal_of(context).tenant_id, task_id)
            if job is not None:  # its continuing process died: go on with the run here
                self._start(job)
        return task

    async def _refresh(self, task_id: str, context: ServerCallContext) -> None:
        """Brings a waiting task up to date with its saga (and goes on with its run when this call claimed it)."""
        principal = principal_of(context)
        job = await run_orm(refresh, principal.tenant_id, task_id, principal)
        if job is not None:
            self._start(job)

    async def _continue(self, params: SendMessageRequest, context: ServerCallContext) -> Task:
        """A message naming a task: the approve of an INPUT_REQUIRED task's gate, or the -32004 refusal."""
        task_id = params.message.task_id
        task = await self._rows.get(task_id, context)
        if task is None:
            raise TaskNotFoundError(message=f"Task {task_id} not found")
        if params.message.context_id and params.message.context_id != task.context_id:
            raise InvalidParamsError(
                message=f"Context {params.message.context_id} does not match context {task.context_id} of task "
                f"{task_id}: send the message with the task's contextId, or without one."
            )
        command = parse_command(params.message)
        if task.status.state != INPUT_REQUIRED:
            raise UnsupportedOperationError(message=TASK_NOT_CONTINUED.format(task_id=task_id))
        gate = task_gate(task)
        args = command.args
        named = (getattr(args, "saga_id", None), getattr(args, "node_id", None))
        if gate is None or command.operation.verb != "approve" or named not in _gate_names(gate):
            expected = json.dumps(approve_command(gate)) if gate else '{"operation": "approve", ...}'
            raise InvalidParamsError(
                message=f"Task {task_id} waits for an approval and takes only its approve command, {expected} (add "
                '"approved": false to reject). Nothing was changed. Send any other command as a new message '
                "without taskId."
            )
        principal = principal_of(context)
        said = Message()
        said.CopyFrom(params.message)
        said.context_id = task.context_id
        job = await run_orm(approve_by_message, principal.tenant_id, task_id, principal, args, said)
        if job is not None:
            self._start(job)
        current = await self._rows.get(task_id, context)
        return current if current is not None else task

    def _start(self, job: Continuation) -> None:
        running = asyncio.get_running_loop().create_task(run_orm(continue_run, job))
        self._continuations.add(running)
        running.add_done_callback(self._finished)

    def _finished(self, running: asyncio.Task[None]) -> None:
        self._continuations.discard(running)
        if not running.cancelled() and running.exception() is not None:
            logger.error("A2A run continuation could not settle its task", exc_info=running.exception())

    async def _settled(self, task: Task, context: ServerCallContext) -> Task:
        deadline = time.monotonic() + CONTINUE_WAIT_SECONDS
        while task.status.state not in SETTLED and time.monotonic() < deadline:
            await asyncio.sleep(POLL_SECONDS / 5)
            task = await self._current(task.id, context) or task
        return task

    async def _follow(self, first: Task, context: ServerCallContext, end_if_settled: bool) -> AsyncGenerator[Event]:
        """The task, then its changes as read from its row, until it settles again (or STREAM_MAX_SECONDS)."""
        yield first
        if end_if_settled and first.status.state in SETTLED:
            return
        last = first
        deadline = time.monotonic() + STREAM_MAX_SECONDS
        while time.monotonic() < deadline:
            await asyncio.sleep(POLL_SECONDS)
            now = await self._current(first.id, context)
            if now is None:
                return
            for event in changes(last, now):
                yield event
            if now.status != last.status and now.status.state in SETTLED:
                return
            last = now


def changes(before: Task, now: Task) -> list[Event]:
    """What a peer streaming the task has not seen: new or replaced artifacts, then the status if it changed."""
    seen = {artifact.artifact_id: artifact for artifact in before.artifacts}
    events: list[Event] = [
        TaskArtifactUpdateEvent(task_id=now.id, context_id=now.context_id, artifact=artifact, last_chunk=True)
        for artifact in now.artifacts
        if seen.get(artifact.artifact_id) != artifact
    ]
    if now.status != before.status:
        events.append(TaskStatusUpdateEvent(task_id=now.id, context_id=now.context_id, status=now.status))
    return events


def _refuse_push_config(params: SendMessageRequest) -> None:
    # The SDK ignores a push config it has no store for; a peer waiting for webhooks would wait forever.
    if params.configuration.HasField("task_push_notification_config"):
        raise PushNotificationNotSupportedError(
            message="Push notifications are not supported (the agent card says pushNotifications: false). Nothing "
            "was created. Send the message without taskPushNotificationConfig and follow the task with "
            "SendStreamingMessage, SubscribeToTask or GetTask."
        )


def _gate_names(gate: dict[str, Any]) -> set[tuple[str, str]]:
    return {(gate["saga_id"], gate["node_id"]), (gate["saga_id"], gate["key"])}
