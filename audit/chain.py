"""The per-saga SHA-256 audit chain: append and verify (docs/audit_hash.md).

event_hash = sha256_hex(canonical_json({"previous_hash": <previous event_hash or null>, "event": <body>}))

The body is every stored field except sequence, previous_hash and event_hash, with `created_at` holding the stored
canonical timestamp text. Appends must be serialized per saga: the coordinator holds the saga row lock for the
whole transaction, which is what makes "read head, insert next" safe; the unique (saga_id, sequence) constraint
turns any missed lock into an IntegrityError instead of a forked chain.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from audit.canonical import sha256_hex
from audit.models import AuditEvent

# Rows fetched per round trip while verifying: bounds memory regardless of chain length.
VERIFY_BATCH_ROWS = 2000

HASHED_FIELDS = (
    "id",
    "saga_id",
    "tenant_id",
    "event_type",
    "actor_principal_id",
    "actor_type",
    "action",
    "action_version",
    "step_id",
    "node_id",
    "status",
    "data",
    "trace_id",
    "span_id",
)


@dataclass(frozen=True)
class EventDraft:
    """One event to append; the chain fills in id, sequence, timestamps and hashes."""

    event_type: str
    actor_principal_id: str
    actor_type: str
    action: str = ""
    action_version: str = ""
    step_id: str = ""
    node_id: str = ""
    status: str = ""
    data: dict[str, Any] = field(default_factory=dict)
    trace_id: str = ""
    span_id: str = ""


@dataclass(frozen=True)
class VerifyResult:
    saga_id: str
    valid: bool
    events_checked: int
    head_hash: str | None = None
    failed_sequence: int | None = None
    reason: str = ""

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"saga_id": self.saga_id, "valid": self.valid, "events_checked": self.events_checked}
        if self.valid:
            out["head_hash"] = self.head_hash
        else:
            out["failed_sequence"] = self.failed_sequence
            out["reason"] = self.reason
        return out


def canonical_timestamp(moment: datetime | None = None) -> str:
    """UTC, microseconds, 'Z' suffix: the exact text that is hashed."""
    moment = (moment or datetime.now(UTC)).astimezone(UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def event_body(event: AuditEvent) -> dict[str, Any]:
    body: dict[str, Any] = {name: getattr(event, name) for name in HASHED_FIELDS}
    body["id"] = str(event.id)
    body["saga_id"] = str(event.saga_id)
    body["created_at"] = event.created_at_text
    return body


def compute_hash(previous_hash: str | None, body: dict[str, Any]) -> str:
    return sha256_hex({"previous_hash": previous_hash, "event": body})


def append(
    *,
    saga_id: uuid.UUID | str,
    tenant_id: str,
    drafts: Sequence[EventDraft],
    head: tuple[int, str | None] | None = None,
) -> list[AuditEvent]:
    """Append events to a chain and write them (the control-plane chains; `link` says the rest)."""
    rows = link(saga_id=saga_id, tenant_id=tenant_id, drafts=drafts, head=head)
    return AuditEvent.objects.bulk_create(rows) if rows else rows


def link(
    *,
    saga_id: uuid.UUID | str,
    tenant_id: str,
    drafts: Sequence[EventDraft],
    head: tuple[int, str | None] | None = None,
) -> list[AuditEvent]:
    """The next events of a saga's chain, linked and hashed but not saved: the caller writes them, in the
    transaction that holds the saga row lock (the coordinator with its own INSERT, sagas.coordinator.sql).

    `head` is the chain's current (last sequence, last event_hash), (0, None) for an empty chain, when the caller
    already read it under that lock (the coordinator keeps it on the saga row); without it, it is read here. A
    wrong head cannot fork the chain: the unique (saga_id, sequence) constraint refuses the insert.
    """
    if not drafts:
        return []
    if head is None:
        head = (
            AuditEvent.objects.filter(saga_id=saga_id)
            .order_by("-sequence")
            .values_list("sequence", "event_hash")
            .first()
        ) or (0, None)
    sequence, previous = head
    stamp = canonical_timestamp()
    rows: list[AuditEvent] = []
    for draft in drafts:
        sequence += 1
        event = AuditEvent(
            id=uuid.uuid4(),
            saga_id=saga_id,
            tenant_id=tenant_id,
            sequence=sequence,
            created_at_text=stamp,
            previous_hash=previous,
            **draft.__dict__,
        )
        event.saga_id = uuid.UUID(str(saga_id))
        event.event_hash = compute_hash(previous, event_body(event))
        previous = event.event_hash
        rows.append(event)
    return rows


def iter_events(saga_id: uuid.UUID | str) -> Iterator[AuditEvent]:
    """Stream a saga's events in sequence order in bounded batches (keyset pagination, constant memory)."""
    after = 0
    while True:
        batch = list(
            AuditEvent.objects.filter(saga_id=saga_id, sequence__gt=after).order_by("sequence")[:VERIFY_BATCH_ROWS]
        )
        yield from batch
        if len(batch) < VERIFY_BATCH_ROWS:
            return
        after = batch[-1].sequence


def verify_events(saga_id: str, events: Iterable[AuditEvent]) -> VerifyResult:
    """Recompute a chain; name the first sequence whose link, order or content does not hold."""
    previous: str | None = None
    expected_sequence = 1
    checked = 0
    for event in events:
        if event.sequence != expected_sequence:
            reason = f"expected sequence {expected_sequence}, found {event.sequence} (a row is missing or reordered)"
            return VerifyResult(saga_id, False, checked, failed_sequence=expected_sequence, reason=reason)
        if event.previous_hash != previous:
            reason = "previous_hash does not match the preceding event's hash (broken link)"
            return VerifyResult(saga_id, False, checked, failed_sequence=event.sequence, reason=reason)
        if compute_hash(previous, event_body(event)) != event.event_hash:
            reason = "event content does not match its event_hash (modified row)"
            return VerifyResult(saga_id, False, checked, failed_sequence=event.sequence, reason=reason)
        previous = event.event_hash
        expected_sequence += 1
        checked += 1
    return VerifyResult(saga_id, True, checked, head_hash=previous)


def verify_chain(saga_id: uuid.UUID | str) -> VerifyResult:
    return verify_events(str(saga_id), iter_events(saga_id))
