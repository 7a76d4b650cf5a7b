"""Saga reads: one saga, and the tenant's sagas as keyset pages (stable under concurrent inserts).

Tenant-scoped (sagas.selectors.scope): another tenant's saga is indistinguishable from a missing one.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.db.models import Exists, OuterRef

from governance.identity.principal import Principal
from governance.identity.rbac import READ, authorize
from sagas.errors import InvalidInput
from sagas.models import Node, Saga, Step
from sagas.selectors.pages import as_utc, keyset_page
from sagas.selectors.scope import tenant_saga, tenant_sagas
from sagas.states import NOT_STARTED_NODE_STATES, RETRYABLE_NODE_STATES, TERMINAL_SAGA, SagaStatus


def saga_get(*, actor: Principal, saga_id: object) -> Saga:
    authorize(actor, READ, "get")
    return tenant_saga(actor, saga_id)


@dataclass(frozen=True)
class SagaPage:
    sagas: list[Saga]
    next_cursor: str | None


def _time_bound(value: datetime | None, name: str) -> datetime | None:
    if value is None:
        return None
    if not isinstance(value, datetime):
        raise InvalidInput(message=f"{name} must be an ISO 8601 timestamp such as 2025-01-31T12:00:00Z.")
    try:
        return as_utc(value)
    except OverflowError as exc:
        raise InvalidInput(message=f"{name} is outside the supported range of timestamps (years 1 to 9999).") from exc


def saga_list(
    *,
    actor: Principal,
    status: str | None = None,
    limit: int = 50,
    cursor: str | None = None,
    created_after: datetime | None = None,
    created_before: datetime | None = None,
    action: str | None = None,
) -> SagaPage:
    """The actor's tenant's sagas, newest first, keyset-paginated (stable under concurrent inserts).

    Optional filters: `status`; `created_after` / `created_before` (exclusive bounds, naive values are UTC);
    `action`, the sagas having a planned node or a journal step with that action id.
    """
    authorize(actor, READ, "list_sagas")
    query = tenant_sagas(actor)
    if status is not None:
        if status not in SagaStatus.values:
            raise InvalidInput(message=f"status must be one of {', '.join(SagaStatus.values)}, got {status!r}.")
        query = query.filter(status=status)
    if (after := _time_bound(created_after, "created_after")) is not None:
        query = query.filter(created_at__gt=after)
    if (before := _time_bound(created_before, "created_before")) is not None:
        query = query.filter(created_at__lt=before)
    if action is not None:
        if not isinstance(action, str) or not action:
            raise InvalidInput(message="action must be a non-empty action id (list_actions shows them).")
        # EXISTS, not a join: a saga with many matching nodes or steps is still listed once.
        query = query.filter(
            Exists(Node.objects.filter(saga=OuterRef("pk"), action=action))
            | Exists(Step.objects.filter(saga=OuterRef("pk"), action=action))
        )
    page = keyset_page(query, limit=limit, cursor=cursor, newest_first=True, start="the newest saga")
    return SagaPage(page.rows, page.next_cursor)


def unfinished_work_pins(action: str, version: str) -> bool:
    """Whether a node of an unfinished saga that has not run yet, or may run again, pins `action@version`: such a
    version must stay active until that work is done (registry.defaults waits before replacing a default)."""
    may_run = NOT_STARTED_NODE_STATES | RETRYABLE_NODE_STATES
    return (
        Node.objects.filter(action=action, action_version=version, status__in=may_run)
        .exclude(saga__status__in=TERMINAL_SAGA)
        .exists()
    )
