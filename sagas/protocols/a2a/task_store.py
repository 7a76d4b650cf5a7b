"""The A2A SDK's TaskStore on a Django model (sagas.models.A2ATask).

Tasks live in our migrations, our admin and our database connection (no second pool, no table created at start-up).
Every method is scoped to the tenant of the Principal that the A2A call context carries (a2a_http puts it there):
peers of one tenant share tasks, another tenant's GetTask answers "task not found" because the row is invisible to
it, exactly as a missing one. What peers read never carries the identity a waiting task keeps to go on with its run
(a2a_gates.public). ORM work runs off the event loop through run_orm (sagas/protocols/orm.py).
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from a2a.server.context import ServerCallContext
from a2a.server.tasks import TaskStore
from a2a.types.a2a_pb2 import ListTasksRequest, ListTasksResponse, Task, TaskState
from a2a.utils.constants import DEFAULT_LIST_TASKS_PAGE_SIZE
from a2a.utils.errors import InternalError, InvalidParamsError
from a2a.utils.task import ListTasksCursor, decode_list_tasks_cursor, encode_list_tasks_cursor
from django.conf import settings
from django.db.models import Q
from django.utils import timezone
from google.protobuf.json_format import MessageToDict, ParseDict

from governance.identity.principal import Principal
from sagas.models import A2ATask
from sagas.protocols.a2a.gates import public
from sagas.protocols.orm import run_orm

# The key under which the request's Principal travels in ServerCallContext.state.
PRINCIPAL_KEY = "semantic_saga.principal"
EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


def principal_of(context: ServerCallContext) -> Principal:
    principal = context.state.get(PRINCIPAL_KEY)
    if not isinstance(principal, Principal):  # only reachable if /a2a were served without BearerAuth
        raise InternalError(message="No authenticated principal for this A2A call.")
    return principal


class DjangoTaskStore(TaskStore):
    """The SDK's unversioned TaskStore interface; one writer per task (the SDK's consumer) saves it in order."""

    async def save(self, task: Task, context: ServerCallContext) -> None:
        await run_orm(_save, principal_of(context).tenant_id, task)

    async def get(self, task_id: str, context: ServerCallContext) -> Task | None:
        return await run_orm(_get, principal_of(context).tenant_id, task_id)

    async def list(self, params: ListTasksRequest, context: ServerCallContext) -> ListTasksResponse:
        return await run_orm(_list, principal_of(context).tenant_id, params)

    async def delete(self, task_id: str, context: ServerCallContext) -> None:
        await run_orm(_delete, principal_of(context).tenant_id, task_id)


# --- ORM units (synchronous, run off the loop) ------------------------------------------------------------------------


def _save(tenant_id: str, task: Task) -> None:
    bound_history(task)
    fields = {
        "context_id": task.context_id,
        "state": TaskState.Name(task.status.state),
        "operation": "",
        "saga_id": "",
        "task": MessageToDict(task),
        "updated_at": _status_time(task),
    }
    fields.update(_summary(task))
    # An UPDATE scoped to the tenant, then an INSERT: a task id of another tenant can never be overwritten (the
    # INSERT would hit the primary key instead). Saves of one task come from one consumer, in order, so the pair
    # needs no transaction.
    if not A2ATask.objects.filter(pk=task.id, tenant_id=tenant_id).update(**fields):
        A2ATask.objects.create(id=task.id, tenant_id=tenant_id, **fields)


def _get(tenant_id: str, task_id: str) -> Task | None:
    row = A2ATask.objects.filter(pk=task_id, tenant_id=tenant_id).only("task").first()
    return None if row is None else public(task_from_json(row.task))


def _list(tenant_id: str, params: ListTasksRequest) -> ListTasksResponse:
    rows = A2ATask.objects.filter(tenant_id=tenant_id)
    if params.context_id:
        rows = rows.filter(context_id=params.context_id)
    if params.status:
        rows = rows.filter(state=TaskState.Name(params.status))
    if params.HasField("status_timestamp_after"):
        rows = rows.filter(updated_at__gte=params.status_timestamp_after.ToDatetime(tzinfo=dt.UTC))
    total = rows.count()
    if params.page_token:
        rows = rows.filter(_after(params.page_token))
    page_size = params.page_size or DEFAULT_LIST_TASKS_PAGE_SIZE
    # One row more than the page tells whether there is a next page without a second query.
    page = list(rows.order_by("-updated_at", "-id").only("id", "updated_at", "task")[: page_size + 1])
    next_token = _cursor(page[page_size - 1]) if len(page) > page_size else ""
    return ListTasksResponse(
        tasks=[public(task_from_json(row.task)) for row in page[:page_size]],
        next_page_token=next_token,
        page_size=page_size,
        total_size=total,
    )


def _delete(tenant_id: str, task_id: str) -> None:
    A2ATask.objects.filter(pk=task_id, tenant_id=tenant_id).delete()


# --- helpers ----------------------------------------------------------------------------------------------------------


def bound_history(task: Task) -> None:
    """At most SAGA_A2A_MAX_TASK_HISTORY messages: history[0], the command the task was created from (a continuation
    runs it again, and ListTasks reads its operation), and the newest others; the oldest after it are dropped.
    Every continuation adds messages, so without this a peer repeating a refused approve would grow the row forever."""
    excess = len(task.history) - settings.SAGA_A2A_MAX_TASK_HISTORY
    if excess > 0:
        del task.history[1 : 1 + excess]


def task_from_json(data: dict[str, Any]) -> Task:
    """The stored task whole (the requester's identity included: a2a_gates.public strips it for peers)."""
    # Unknown fields are kept out rather than failing: a row written by a newer SDK stays readable.
    task = Task()
    ParseDict(data, task, ignore_unknown_fields=True)
    return task


def _status_time(task: Task) -> dt.datetime:
    if task.status.HasField("timestamp"):
        at: dt.datetime = task.status.timestamp.ToDatetime(tzinfo=dt.UTC)
        return at
    return timezone.now()


def _summary(task: Task) -> dict[str, str]:
    """The command's operation and saga id, copied into columns so operators can find a saga's tasks."""
    summary: dict[str, str] = {}
    command = _first_data_part(task)
    if isinstance(command.get("operation"), str):
        summary["operation"] = command["operation"][:40]
    if isinstance(command.get("saga_id"), str):
        summary["saga_id"] = command["saga_id"][:100]
    elif summary.get("operation") == "begin":  # the saga is born with this task: its id is in the result
        for artifact in task.artifacts:
            for part in artifact.parts:
                if part.HasField("data") and part.data.HasField("struct_value"):
                    saga_id = part.data.struct_value.fields.get("id")
                    if saga_id is not None and saga_id.HasField("string_value"):
                        summary["saga_id"] = saga_id.string_value[:100]
    return summary


def _first_data_part(task: Task) -> dict[str, Any]:
    if not task.history:
        return {}
    for part in task.history[0].parts:
        if part.HasField("data") and part.data.HasField("struct_value"):
            command: dict[str, Any] = MessageToDict(part.data.struct_value)
            return command
    return {}


def _cursor(row: A2ATask) -> str:
    # From the stored column (microseconds on both databases), so the next page's comparison is exact.
    since_epoch = row.updated_at - EPOCH
    nanoseconds = (since_epoch.days * 86_400 + since_epoch.seconds) * 1_000_000_000 + since_epoch.microseconds * 1_000
    return encode_list_tasks_cursor(ListTasksCursor(timestamp_ns=nanoseconds, task_id=row.id))


def _after(page_token: str) -> Q:
    """Rows strictly after the cursor in the (updated_at desc, id desc) order."""
    cursor = decode_list_tasks_cursor(page_token)
    if cursor is None or cursor.timestamp_ns is None:
        raise InvalidParamsError(message="Invalid page token: pass the nextPageToken of the previous ListTasks answer.")
    try:
        at = EPOCH + dt.timedelta(microseconds=cursor.timestamp_ns // 1_000)
    except OverflowError as exc:
        raise InvalidParamsError(message="Invalid page token: its timestamp is out of range.") from exc
    return Q(updated_at__lt=at) | Q(updated_at=at, id__lt=cursor.task_id)
