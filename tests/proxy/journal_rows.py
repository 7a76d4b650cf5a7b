"""A session's journal as two ways of writing it must leave it alike: its steps' columns and its step events, with
what names the session or says when left out."""

from __future__ import annotations

from typing import Any

from audit.models import AuditEvent
from sagas.models import Step
from sagas.selectors.journal_digests import DIGESTS, FORGED


def step_rows(saga_id: str) -> list[dict[str, Any]]:
    """Every column of the session's steps, in sequence, but their ids, saga, times and lease deadline."""
    left_out = {"id", "saga", "created_at", "updated_at", "lease_expires_at"}
    names = [field.attname for field in Step._meta.concrete_fields if field.name not in left_out]
    return [{name: getattr(step, name) for name in names} for step in Step.objects.filter(saga_id=saga_id)]


def step_events(saga_id: str) -> tuple[list[tuple[Any, ...]], list[dict[str, Any]]]:
    """Each step event's type, status, action, actor and data but its journal digests; and the digests the chain
    holds for each step, the newest of each field (one transaction stamps them on its newest event naming the step,
    so a begin and a finish apart stamp two events, one transaction one; sagas.coordinator._journal_digests). The
    digests' MAC binds the session's id, so it is left out."""
    rows = list(AuditEvent.objects.filter(saga_id=saga_id).exclude(step_id="").order_by("sequence"))
    left_out = (DIGESTS, FORGED)
    events = [
        (e.event_type, e.status, e.action, e.actor_principal_id, {k: v for k, v in e.data.items() if k not in left_out})
        for e in rows
    ]
    held: dict[str, dict[str, Any]] = {}
    for event in rows:
        held.setdefault(event.step_id, {}).update(event.data.get(DIGESTS, {}))
    return events, list(held.values())
