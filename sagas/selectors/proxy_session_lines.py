"""A line per proxy session, as `semantic-saga status` and the console's list of sessions show it: its state, client,
calls by status, checkpoints and how its undo ended, for a page of sessions in four queries.

Apart from the ledger's rows (sagas.selectors.proxy_ledger) so that `status` loads none of them.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db.models import Count

from governance.identity.principal import Principal
from sagas.models import Checkpoint, Node, ProxyCallIntent, Saga, Step
from sagas.selectors.proxy_sessions import HELD_STATUSES, proxy_sessions
from sagas.selectors.undo_outcome import UndoOutcome, undo_outcomes


@dataclass(frozen=True)
class SessionLine:
    """One line of `semantic-saga status`."""

    id: str
    status: str
    preview: bool
    client: str
    principal: str  # who opened the session (the agent's principal)
    calls: int
    by_status: dict[str, int]
    checkpoints: list[str]
    created_at: datetime
    undo: UndoOutcome | None = None  # how its undo ended, once undone (sagas.selectors.undo_outcome)


def session_lines(*, actor: Principal, limit: int = 20) -> list[SessionLine]:
    """The tenant's newest proxy sessions with their call counts by status and their checkpoints."""
    return lines_of(list(proxy_sessions(actor)[:limit]))


def lines_of(sagas: list[Saga]) -> list[SessionLine]:
    """A line for each of `sagas` (proxy sessions the caller may read), in their order, in five queries."""
    counts: dict[Any, dict[str, int]] = {}
    for row in (
        Step.objects.filter(saga__in=sagas, action__startswith="proxy.")
        .values("saga_id", "status")
        .annotate(n=Count("id"))
    ):
        counts.setdefault(row["saga_id"], {})[row["status"].lower()] = row["n"]
    # Calls out on an intent, their steps not written yet (sagas.selectors.proxy_ledger.calls_out): executing.
    out = ProxyCallIntent.objects.filter(saga__in=sagas).values("saga_id").annotate(n=Count("id"))
    for saga_id, calls in out.values_list("saga_id", "n"):
        by_status = counts.setdefault(saga_id, {})
        by_status["executing"] = by_status.get("executing", 0) + calls
    held = Node.objects.filter(saga__in=sagas, step__isnull=True, action__startswith="proxy.", status__in=HELD_STATUSES)
    for row in held.values("saga_id", "status").annotate(n=Count("id")):
        counts.setdefault(row["saga_id"], {})[HELD_STATUSES[row["status"]]] = row["n"]
    marks: dict[Any, list[str]] = {}
    for checkpoint in Checkpoint.objects.filter(saga__in=sagas).order_by("created_at"):
        marks.setdefault(checkpoint.saga_id, []).append(checkpoint.name)
    undone = undo_outcomes(sagas)
    return [_line(saga, counts.get(saga.id, {}), marks.get(saga.id, []), undone.get(saga.id)) for saga in sagas]


def _line(saga: Saga, by_status: dict[str, int], checkpoints: list[str], undo: UndoOutcome | None) -> SessionLine:
    client = saga.metadata.get("proxy", {}).get("client", {}) if isinstance(saga.metadata, dict) else {}
    name = " ".join(str(part) for part in (client.get("name"), client.get("version")) if part) or "unknown client"
    return SessionLine(
        id=str(saga.id),
        status=saga.status,
        preview=saga.preview,
        client=name,
        principal=saga.creator_principal_id,
        calls=sum(by_status.values()),
        by_status=by_status,
        checkpoints=checkpoints,
        created_at=saga.created_at,
        undo=undo,
    )
