"""Keyset pages: the opaque cursor of lists ordered by (created_at, id), the saga list and the approval queue."""

from __future__ import annotations

import base64
import json
import uuid
from datetime import UTC, datetime

from sagas.errors import InvalidInput


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
