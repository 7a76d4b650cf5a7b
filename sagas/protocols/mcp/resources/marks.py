"""The cheap rows the watcher polls: each watched saga's change mark, and a tenant's new audit events.

Both are read from committed rows, so a change made by any process (a Celery worker, a management command, another
server replica) is seen on SQLite and PostgreSQL alike. Reads only: the coordinator stays the only writer.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from django.db.models import Exists, OuterRef, Subquery

from audit.models import AuditEvent
from sagas.models import Saga

# A saga's mark: (updated_at, its newest audit sequence). Either moves on every committed change of the saga.
Mark = tuple[datetime, int | None]
# Audit rows are stamped before their transaction commits: look this far behind the newest stamp seen, so a row
# committed late by a slower process is still found (rows already sent are remembered by id).
LOOKBACK = timedelta(seconds=15)
EVENTS_PER_POLL = 500
_STAMP = "%Y-%m-%dT%H:%M:%S.%fZ"


def saga_marks(saga_ids: Iterable[str]) -> dict[str, Mark]:
    """One query for every watched saga: id -> mark (a saga that does not exist is absent)."""
    newest = AuditEvent.objects.filter(saga_id=OuterRef("pk")).order_by("-sequence").values("sequence")[:1]
    rows = Saga.objects.filter(pk__in=list(saga_ids)).annotate(last_sequence=Subquery(newest))
    return {str(pk): (updated, last) for pk, updated, last in rows.values_list("pk", "updated_at", "last_sequence")}


def stamp(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime(_STAMP)


@dataclass
class EventCursor:
    """Where a tenant's audit stream was read up to: from when (nothing older is sent), the newest stamp seen, and
    the ids already sent within the lookback window."""

    start: str
    since: str
    sent: dict[str, str]  # event id -> its stamp, pruned to the lookback window

    @classmethod
    def now(cls) -> EventCursor:
        moment = stamp(datetime.now(UTC))
        return cls(moment, moment, {})


def new_events(tenant_id: str, cursor: EventCursor) -> list[dict[str, Any]]:
    """The tenant's saga audit events not sent yet (control-plane chains excluded), oldest first; moves `cursor`."""
    floor = stamp(datetime.strptime(cursor.since, _STAMP).replace(tzinfo=UTC) - LOOKBACK)
    rows = (
        AuditEvent.objects.filter(tenant_id=tenant_id, created_at_text__gte=floor)
        .filter(Exists(Saga.objects.filter(pk=OuterRef("saga_id"), tenant_id=tenant_id)))
        .order_by("created_at_text", "saga_id", "sequence")[:EVENTS_PER_POLL]
    )
    fresh = [event for event in rows if str(event.id) not in cursor.sent and event.created_at_text >= cursor.start]
    for event in fresh:
        cursor.sent[str(event.id)] = event.created_at_text
        cursor.since = max(cursor.since, event.created_at_text)
    cursor.sent = {key: when for key, when in cursor.sent.items() if when >= floor}
    return [public_fields(event) for event in fresh]


def public_fields(event: AuditEvent) -> dict[str, Any]:
    """What a log record carries: the event's public identity and outcome, never its data, hashes or trace ids."""
    return {
        "saga_id": str(event.saga_id),
        "sequence": event.sequence,
        "event_type": event.event_type,
        "status": event.status,
        "action": event.action,
        "action_version": event.action_version,
        "node_id": event.node_id,
        "step_id": event.step_id,
        "actor_principal_id": event.actor_principal_id,
        "actor_type": event.actor_type,
        "created_at": event.created_at_text,
    }
