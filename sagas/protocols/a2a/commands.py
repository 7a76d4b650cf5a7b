"""The A2A surface: structured commands from peer agents, answered as durable tasks.

A command is one A2A message with exactly one data part, `{"operation": ..., <that operation's fields>}`, naming
an operation of the table (sagas.operations.table): the same strict arguments model, RBAC capability, handler and
result as the MCP tool. Natural language is never executed.

- A malformed command is refused before any task exists (JSON-RPC -32602, raised from the request context builder
  in a2a_http), with a message naming every problem. Content the card does not declare (it declares only
  application/json) is refused with -32005 instead: a part stating another media type, or a bare text part (text
  without a media type is text/plain); the message shows the data part to send.
- Success completes the task with one artifact `semantic-saga-result`: one application/json data part holding the
  dict the MCP tool returns.
- A refusal (ServiceError: authorization, a domain rule, "Saga not found") completes the task as REJECTED with the
  reason; an unexpected error marks it FAILED, exposing only the error type.
- `begin` records `_interop` {protocol, version, context_id, task_id} in the saga's metadata.
- A `run` that stops at an approval gate ends its turn as INPUT_REQUIRED instead (sagas.protocols.a2a.gates); an
  `approve` message naming that task, or an operator's decision, continues it (sagas.protocols.a2a.continuation).
- A task is never cancelled: a side effect is not interrupted halfway; `rollback` compensates instead.

Transport (JSON-RPC framing, the version header, task persistence and retrieval) belongs to the a2a-sdk.
Tests: tests/protocols/test_a2a_*.py.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Any

from a2a.helpers import new_data_part, new_text_part
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.tasks import TaskUpdater
from a2a.types.a2a_pb2 import Message, Part, Task, TaskState, TaskStatus
from a2a.utils.errors import ContentTypeNotSupportedError, InvalidParamsError, TaskNotCancelableError
from django.conf import settings
from google.protobuf.json_format import MessageToDict
from google.protobuf.timestamp_pb2 import Timestamp
from pydantic import ValidationError

from governance.errors import Forbidden, ServiceError
from governance.identity.principal import Principal
from sagas.operations.arguments import Args, BeginArgs, argument_problems
from sagas.operations.invoke import invoke
from sagas.operations.operation import Operation
from sagas.operations.table import A2A_OPERATIONS
from sagas.protocols.a2a.gates import gate_message, gate_metadata, gate_of
from sagas.protocols.a2a.task_store import principal_of
from sagas.protocols.orm import run_orm

logger = logging.getLogger("sagas.protocols.a2a.commands")

PROTOCOL_VERSION = "1.0"
RESULT_ARTIFACT = "semantic-saga-result"
JSON_MEDIA_TYPE = "application/json"
# What a command looks like on the wire, for the messages that refuse something else.
EXAMPLE_PARTS = '"parts": [{"data": {"operation": "begin", "metadata": {}}}]'
# The SDK client and most peers send contextId as a UUID; the bound keeps the indexed column's size honest.
MAX_CONTEXT_ID_LENGTH = 200

CANCEL_REFUSAL = (
    "A2A tasks are not cancelable: Semantic Saga never interrupts a side effect halfway (it could leave the outside "
    'world changed with no record of it). To undo a saga\'s work, send {{"operation": "rollback", "saga_id": '
    '"<saga id>"}}: it compensates every completed step, newest first. Task {task_id} is unchanged.'
)


@dataclass(frozen=True)
class Command:
    operation: Operation[Any]
    args: Args


# --- parsing (before any task exists) -----------------------------------------------------------------------------


def parse_command(message: Message | None) -> Command:
    """The message's one data part as a validated command; InvalidParamsError (-32602) names what is wrong."""
    if message is None:
        raise _invalid("the request has no message")
    if len(message.context_id) > MAX_CONTEXT_ID_LENGTH:
        raise _invalid(f"contextId is longer than {MAX_CONTEXT_ID_LENGTH} characters")
    _require_small_metadata(message)
    body = _command_object(list(message.parts))
    operation = body.pop("operation", None)
    if operation is None:
        raise _invalid(f"the data part has no 'operation' (one of: {', '.join(A2A_OPERATIONS)})")
    if not isinstance(operation, str) or operation not in A2A_OPERATIONS:
        raise _invalid(f"unknown operation {operation!r} (one of: {', '.join(A2A_OPERATIONS)})")
    found = A2A_OPERATIONS[operation]
    try:
        args = found.arguments.model_validate(body)
    except ValidationError as error:
        # A peer sees no input schema (the card shows examples): say which fields the operation takes.
        takes = ["operation", *found.arguments.model_fields]
        problems = argument_problems(error, root="(command)", takes=takes)
        raise _invalid(
            f"{operation}: {'; '.join(p.message for p in problems)}",
            errors=[{"field": p.field, "message": p.message} for p in problems],
        ) from None
    return Command(found, args)


def _require_small_metadata(message: Message) -> None:
    """A task keeps the message it was created from, metadata included: a bound keeps a peer from storing
    megabytes per (even refused) command."""
    if not message.HasField("metadata"):
        return
    size = len(json.dumps(MessageToDict(message.metadata), separators=(",", ":")))
    limit = settings.SAGA_A2A_MAX_METADATA_BYTES
    if size > limit:
        raise _invalid(
            f"the message's metadata is {size} bytes of JSON; at most {limit} are kept with a task "
            "(SAGA_A2A_MAX_METADATA_BYTES). Nothing was created: send your labels in the saga's metadata (begin) or "
            "keep the message metadata small"
        )


def _command_object(parts: list[Part]) -> dict[str, Any]:
    for part in parts:
        _require_json_content(part)
    if len(parts) != 1:
        raise _invalid(f"a command is exactly one data part, and this message has {len(parts)} parts")
    kind = parts[0].WhichOneof("content")
    if kind == "text":  # only a text part that claims to be JSON gets here (_require_json_content)
        raise _invalid("a text part is not a command, even one declared as JSON: send the command as a data part")
    if kind != "data":
        raise _invalid(f"a {kind or 'empty'} part is not a command; send one data part")
    if parts[0].data.WhichOneof("kind") != "struct_value":
        raise _invalid("the data part must be a JSON object")
    body: dict[str, Any] = _whole_numbers(MessageToDict(parts[0].data.struct_value))
    return body


def _require_json_content(part: Part) -> None:
    """-32005 for a part whose content type the card does not declare: the one it states, or text/plain for bare
    text (a part without a media type and carrying text is text by any reading; data parts are JSON)."""
    implied = not part.media_type and part.WhichOneof("content") == "text"
    media_type = "text/plain" if implied else part.media_type
    if not media_type or media_type == JSON_MEDIA_TYPE:
        return
    stated = "a text part without a mediaType is text/plain" if implied else f"a part declares {media_type}"
    raise ContentTypeNotSupportedError(
        message=f"Content type {media_type} is not supported ({stated}): the agent card's only input mode is "
        f"{JSON_MEDIA_TYPE} and natural language is never executed. Nothing was created. Send the command as one "
        f"data part, for example {EXAMPLE_PARTS}; the agent card's skills list the operations and examples."
    )


def _whole_numbers(value: Any) -> Any:
    """Protobuf's Value carries every JSON number as a double, so a peer's `4` arrives as `4.0`: whole floats become
    ints again (everywhere, so an action's input reads as the peer wrote it). A non-whole float stays a float and a
    strict integer field refuses it."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {key: _whole_numbers(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_whole_numbers(item) for item in value]
    return value


def _invalid(problem: str, **data: Any) -> InvalidParamsError:
    return InvalidParamsError(
        message=f"Invalid Semantic Saga command: {problem}. Nothing was created. Send one data part such as "
        f"{EXAMPLE_PARTS}; the agent card's skills list the operations and examples.",
        data=data or None,
    )


# --- execution ------------------------------------------------------------------------------------------------------


class SagaAgentExecutor(AgentExecutor):
    """Runs one validated command as one ORM unit off the event loop and settles its task."""

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        command = parse_command(context.message)  # validated by the request context builder; cannot fail here
        principal = principal_of(context.call_context)
        task_id, context_id = str(context.task_id), str(context.context_id)
        # The task comes first: the tenant's peers can read it (WORKING) while the command runs.
        history = [context.message] if context.message is not None else []
        status = TaskStatus(state=TaskState.TASK_STATE_WORKING, timestamp=_now())
        await event_queue.enqueue_event(Task(id=task_id, context_id=context_id, status=status, history=history))
        updater = TaskUpdater(event_queue, task_id, context_id)
        args = command.args
        if isinstance(args, BeginArgs):
            interop = {"protocol": "a2a", "version": PROTOCOL_VERSION, "context_id": context_id, "task_id": task_id}
            args = args.model_copy(update={"metadata": {**args.metadata, "_interop": interop}})
        try:
            # On a thread of the ORM pool: the SDK saves this task's states on others meanwhile, so a long command
            # (run waits up to a minute) neither hides its WORKING task from GetTask nor holds back an answer to a
            # peer that asked for returnImmediately.
            result = await run_orm(run_command, command.operation, principal, args)
        except ServiceError as refusal:
            await updater.reject(updater.new_agent_message(refusal_parts(refusal)))
            return
        except Exception as exc:  # a bug or an outage: say so without leaking internals
            logger.exception("A2A %s failed unexpectedly task=%s", command.operation.verb, task_id)
            text = (
                f"{command.operation.verb} failed unexpectedly ({type(exc).__name__}). Read the saga (get) before "
                "retrying: the command may or may not have changed it."
            )
            await updater.failed(updater.new_agent_message([new_text_part(text)]))
            return
        await updater.add_artifact([new_data_part(result, media_type=JSON_MEDIA_TYPE)], name=RESULT_ARTIFACT)
        gate = gate_of(result) if command.operation.verb == "run" else None
        if gate is not None:
            # The run stopped at an approval: the turn ends waiting for it (a2a_continue goes on from there).
            message = gate_message(gate, task_id, context_id)
            metadata = gate_metadata(gate, principal)
            await updater.update_status(TaskState.TASK_STATE_INPUT_REQUIRED, message, metadata=metadata)
            return
        await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        # Never reached (a2a_http's handler refuses CancelTask first); refusing here too keeps it so.
        raise TaskNotCancelableError(message=CANCEL_REFUSAL.format(task_id=context.task_id))


def run_command(operation: Operation[Any], principal: Principal, args: Args) -> dict[str, Any]:
    """One ORM unit: invoke the operation, return JSON-ready data."""
    result: dict[str, Any] = json.loads(json.dumps(invoke(operation, principal, args), default=str))
    return result


def refusal_parts(refusal: ServiceError) -> list[Part]:
    reason = f"{refusal.code}: {refusal.message}"
    if isinstance(refusal, Forbidden):
        # "is not authorized": semantic-saga-mcp's words ("Principal is not authorized to call ..."), which its
        # A2A smoke job matches on.
        reason = f"Not authorized (the principal is not authorized to call this operation). {reason}"
    error = json.loads(json.dumps(refusal.as_dict(), default=str))
    return [new_text_part(reason), new_data_part({"error": error}, media_type=JSON_MEDIA_TYPE)]


def _now() -> Timestamp:
    stamp = Timestamp()
    stamp.GetCurrentTime()
    return stamp
