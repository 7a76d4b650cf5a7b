"""The McpTask rows: synchronous ORM units, run off the event loop through sagas.protocols.orm.run_orm.

Every read is scoped to the task's owner (tenant and principal): another caller's task id finds nothing, exactly as
a missing one. Each write is one conditional UPDATE (no transaction needed): a task leaves a non-terminal status
once, and only the process holding its driver lease advances it.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import uuid
from dataclasses import dataclass
from typing import Any

from django.db.models import Q, QuerySet
from django.utils import timezone

from sagas.models import McpTask

TERMINAL = ("completed", "failed", "cancelled")
# Expired tasks removed per task created: enough to keep up with creation, small enough to cost nothing.
PURGE_BATCH = 100


@dataclass(frozen=True)
class Owner:
    tenant_id: str
    principal_id: str


@dataclass(frozen=True)
class NewTask:
    kind: str
    protocol_version: str
    status: str
    status_message: str
    request: dict[str, Any]
    ttl_ms: int | None
    poll_interval_ms: int
    saga_id: str = ""
    node_id: str = ""
    result: dict[str, Any] | None = None


def task_create(owner: Owner, new: NewTask, *, driver: str, lease_seconds: float) -> McpTask:
    """A new task, durable when this returns (tasks/get finds it from any process), its driver lease held by
    `driver` unless it is born terminal."""
    now = timezone.now()
    _purge_expired(now)
    terminal = new.status in TERMINAL
    return McpTask.objects.create(
        id=str(uuid.uuid4()),
        tenant_id=owner.tenant_id,
        principal_id=owner.principal_id,
        kind=new.kind,
        protocol_version=new.protocol_version,
        saga_id=new.saga_id,
        node_id=new.node_id,
        status=new.status,
        status_message=new.status_message,
        request=new.request,
        result=new.result,
        ttl_ms=new.ttl_ms,
        poll_interval_ms=new.poll_interval_ms,
        driver="" if terminal else driver,
        driver_until=None if terminal else now + dt.timedelta(seconds=lease_seconds),
        created_at=now,
        updated_at=now,
        expires_at=None if new.ttl_ms is None else now + dt.timedelta(milliseconds=new.ttl_ms),
    )


def task_find(owner: Owner, task_id: str) -> McpTask | None:
    """The owner's task, unless it expired."""
    return _live(owner).filter(pk=task_id).first()


def task_by_id(task_id: str) -> McpTask:
    return McpTask.objects.get(pk=task_id)


def task_page(owner: Owner, cursor: str | None, limit: int) -> tuple[list[McpTask], str | None]:
    """The owner's tasks, newest first, `limit` at a time; the cursor is opaque to clients."""
    rows = _live(owner).order_by("-created_at", "-id")
    if cursor:
        created, last_id = _decode(cursor)
        rows = rows.filter(Q(created_at__lt=created) | Q(created_at=created, id__lt=last_id))
    page = list(rows[: limit + 1])
    following = _encode(page[limit - 1]) if len(page) > limit else None
    return page[:limit], following


def task_claim(task_id: str, driver: str, lease_seconds: float) -> bool:
    """Take (or renew) the task's driver lease: true when `driver` holds it now. A lease whose holder stopped
    renewing it lapses, so a task left by a dead process is taken over."""
    now = timezone.now()
    free = Q(driver="") | Q(driver=driver) | Q(driver_until__lt=now)
    return bool(
        McpTask.objects.filter(free, pk=task_id)
        .exclude(status__in=TERMINAL)
        .update(driver=driver, driver_until=now + dt.timedelta(seconds=lease_seconds))
    )


def task_release(task_id: str, driver: str) -> None:
    McpTask.objects.filter(pk=task_id, driver=driver).update(driver="", driver_until=None)


def task_note(task_id: str, status: str, message: str) -> None:
    """A non-terminal task's status and message (what it waits for now)."""
    McpTask.objects.filter(pk=task_id).exclude(status__in=TERMINAL).update(
        status=status, status_message=message, updated_at=timezone.now()
    )


def task_remember(task_id: str, request: dict[str, Any]) -> None:
    """Replace a non-terminal task's `request`: what its kind must know to go on in another process (only the
    driver, holding the lease, calls it)."""
    McpTask.objects.filter(pk=task_id).exclude(status__in=TERMINAL).update(request=request, updated_at=timezone.now())


def task_finish(
    task_id: str, status: str, message: str, *, result: dict[str, Any] | None, error: dict[str, Any] | None
) -> bool:
    """End the task (once: false when it already ended)."""
    if status not in TERMINAL:
        raise ValueError(f"{status!r} is not a terminal task status; use task_note for {TERMINAL} others.")
    return bool(
        McpTask.objects.filter(pk=task_id)
        .exclude(status__in=TERMINAL)
        .update(
            status=status,
            status_message=message,
            result=result,
            error=error,
            driver="",
            driver_until=None,
            updated_at=timezone.now(),
        )
    )


def _live(owner: Owner) -> QuerySet[McpTask]:
    return McpTask.objects.filter(tenant_id=owner.tenant_id, principal_id=owner.principal_id).exclude(
        expires_at__lt=timezone.now()
    )


def _purge_expired(now: dt.datetime) -> None:
    expired = McpTask.objects.filter(expires_at__lt=now).values_list("pk", flat=True)[:PURGE_BATCH]
    McpTask.objects.filter(pk__in=list(expired)).delete()


def _encode(row: McpTask) -> str:
    raw = json.dumps([row.created_at.isoformat(), row.id]).encode()
    return base64.urlsafe_b64encode(raw).decode()


def _decode(cursor: str) -> tuple[dt.datetime, str]:
    try:
        created, last_id = json.loads(base64.urlsafe_b64decode(cursor.encode()))
        return dt.datetime.fromisoformat(created), str(last_id)
    except (ValueError, TypeError) as bad:
        raise InvalidCursor(f"The cursor {cursor!r} is not one tasks/list gave; start again without it.") from bad


class InvalidCursor(ValueError):
    """A tasks/list cursor this server did not issue."""
