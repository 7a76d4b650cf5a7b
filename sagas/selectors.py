"""Reads: tenant-scoped saga lookups and listings. Another tenant's saga is indistinguishable from a missing one."""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from datetime import datetime

from django.db.models import Q

from governance.identity import Principal
from governance.rbac import authorize
from sagas.coordinator._tx import parse_uuid, tenant_sagas
from sagas.errors import InvalidInput, saga_not_found
from sagas.models import Saga
from sagas.states import SagaStatus


def saga_get(*, actor: Principal, saga_id: object) -> Saga:
    authorize(actor, "get")
    parsed = parse_uuid(saga_id)
    saga = tenant_sagas(actor).filter(pk=parsed).first() if parsed else None
    if saga is None:
        raise saga_not_found(saga_id)
    return saga


@dataclass(frozen=True)
class SagaPage:
    sagas: list[Saga]
    next_cursor: str | None


def _encode_cursor(saga: Saga) -> str:
    raw = json.dumps([saga.created_at.isoformat(), str(saga.id)]).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _decode_cursor(cursor: str) -> tuple[datetime, str]:
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        created, saga_id = json.loads(raw)
        return datetime.fromisoformat(created), str(saga_id)
    except (ValueError, TypeError) as exc:
        raise InvalidInput(
            message="cursor is not one this server issued. Pass next_cursor from a previous list_sagas answer, "
            "or omit it to start from the newest saga."
        ) from exc


def saga_list(*, actor: Principal, status: str | None = None, limit: int = 50, cursor: str | None = None) -> SagaPage:
    """The actor's tenant's sagas, newest first, keyset-paginated (stable under concurrent inserts)."""
    authorize(actor, "list_sagas")
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= 500:
        raise InvalidInput(message=f"limit must be an integer from 1 to 500, got {limit!r}.")
    query = tenant_sagas(actor)
    if status is not None:
        if status not in SagaStatus.values:
            raise InvalidInput(message=f"status must be one of {', '.join(SagaStatus.values)}, got {status!r}.")
        query = query.filter(status=status)
    if cursor:
        created, saga_id = _decode_cursor(cursor)
        query = query.filter(Q(created_at__lt=created) | Q(created_at=created, id__lt=saga_id))
    rows = list(query.order_by("-created_at", "-id")[: limit + 1])
    more = len(rows) > limit
    rows = rows[:limit]
    return SagaPage(rows, _encode_cursor(rows[-1]) if more and rows else None)
