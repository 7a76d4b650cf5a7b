"""Which nodes may run now: ready nodes within the run's capacity, and how many the run may still start.

The two reads every chained step makes (ready nodes with the saga's EXECUTING count, dependants a completion made
ready) are named statements of `sagas.coordinator.sql.statements`; this module decides with what they return.
"""

from __future__ import annotations

import uuid

from django.db.models import Q, QuerySet
from django.db.models.functions import Now

from sagas.coordinator._tx import Tx
from sagas.coordinator.sql import statements
from sagas.models import Node, Saga
from sagas.states import NodeStatus, SagaStatus


def pinned_contract_row(node: Node) -> tuple[bool | None, str | None, str | None] | None:
    """The registry row a node from `statements.ready_nodes` pinned, as that query read it, or None for a node
    read otherwise."""
    if not hasattr(node, "contract_text"):
        return None
    active, digest, text = (getattr(node, name) for name in statements.READY_EXTRAS[1:])  # query columns
    return (None if active is None else bool(active)), digest, text


def ready_due(saga: Saga) -> QuerySet[Node]:
    """READY nodes of the saga whose retry backoff (if any) has passed, in planning order."""
    due = Q(next_attempt_at__isnull=True) | Q(next_attempt_at__lte=Now())
    return (
        Node.objects.filter(saga=saga, status=NodeStatus.READY).filter(due).select_related("step").order_by("position")
    )


def executing_count(saga: Saga) -> int:
    return Node.objects.filter(saga=saga, status=NodeStatus.EXECUTING).count()


def ready_within_capacity(tx: Tx, only: uuid.UUID | None = None) -> list[Node]:
    """The ready nodes (or the one node `only`) that the saga's current run may start now, across all workers.

    One query: the ready rows carry the saga's EXECUTING count, so the capacity check costs no round trip of its
    own; none at all when the run is spent or the saga is not ACTIVE.
    """
    saga = tx.saga
    if saga.status != SagaStatus.ACTIVE or saga.run_steps_left <= 0:
        return []
    rows = statements.ready_nodes(saga.id, saga.run_max_parallel, only)
    if not rows:
        return []
    free = min(saga.run_max_parallel - getattr(rows[0], "executing"), saga.run_steps_left)  # noqa: B009
    return rows[: max(0, free)]


def capacity(tx: Tx) -> int:
    """How many more attempts the saga's current run may start now, across all workers."""
    if tx.saga.status != SagaStatus.ACTIVE:
        return 0
    return max(0, min(tx.saga.run_max_parallel - executing_count(tx.saga), tx.saga.run_steps_left))
