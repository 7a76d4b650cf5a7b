"""Keyset pages of lists ordered by (created_at, id), the saga list and the approval queue: one page's rows and
the opaque cursor of the next."""

from __future__ import annotations

import base64
import json
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Generic, TypeVar

from django.db.models import Q, QuerySet

from sagas.errors import InvalidInput
from sagas.models import Approval, Saga

# The most rows one page may hold: bounds a request's query and answer. The argument models cap `limit` the same.
MAX_PAGE_ROWS = 500

Row = TypeVar("Row", Saga, Approval)


@dataclass(frozen=True)
class KeysetPage(Generic[Row]):
    rows: list[Row]
    next_cursor: str | None  # None on the last page


def keyset_page(
    query: QuerySet[Row], *, limit: int, cursor: str | None, newest_first: bool, start: str
) -> KeysetPage[Row]:
    """`limit` rows of `query` in (created_at, id) order, newest or oldest first, after the row `cursor` names.

    Stable under concurrent inserts: a row created meanwhile never shifts a page, so none is repeated or skipped.
    `start` says, in a refused cursor's message, where omitting the cursor begins.
    """
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_PAGE_ROWS:
        raise InvalidInput(message=f"limit must be an integer from 1 to {MAX_PAGE_ROWS}, got {limit!r}.")
    if cursor:
        created, row_id = decode_keyset_cursor(cursor, start=start)
        if newest_first:
            query = query.filter(Q(created_at__lt=created) | Q(created_at=created, id__lt=row_id))
        else:
            query = query.filter(Q(created_at__gt=created) | Q(created_at=created, id__gt=row_id))
    order = ("-created_at", "-id") if newest_first else ("created_at", "id")
    rows = list(query.order_by(*order)[: limit + 1])  # one more than asked: is there a next page?
    if len(rows) <= limit:
        return KeysetPage(rows, None)
    rows = rows[:limit]
    return KeysetPage(rows, encode_keyset_cursor(rows[-1].created_at, rows[-1].id))


def encode_keyset_cursor(created_at: datetime, row_id: object) -> str:
    """An opaque page cursor for lists ordered by (created_at, id): saga lists and the approval queue."""
    raw = json.dumps([created_at.isoformat(), str(row_id)]).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_keyset_cursor(cursor: str, *, start: str) -> tuple[datetime, uuid.UUID]:
    """The (created_at, id) a cursor from encode_keyset_cursor carries; `start` says where omitting it begins."""
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        created, row_id = json.loads(raw)
        # Both parts are checked here: a forged cursor must be refused, never reach the query as garbage.
        return as_utc(datetime.fromisoformat(created)), uuid.UUID(str(row_id))
    except (ValueError, TypeError, OverflowError) as exc:
        raise InvalidInput(
            message="cursor is not one this server issued. Pass next_cursor from a previous answer, or omit it to "
            f"start from {start}."
        ) from exc


def as_utc(value: datetime) -> datetime:
    """A naive timestamp is taken as UTC; any offset is normalized to UTC (OverflowError at the calendar's edge)."""
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
