"""Which nodes may run now: ready nodes within the run's capacity, and dependants a completion made ready.

The two reads every chained step makes are hand-written SQL (docs/benchmarks.md, "Where a chained step's time
goes"): building these through the ORM cost several times what the database spends answering them.

Both are plain SQL that SQLite and PostgreSQL read alike, built once per backend; values are prepared by the model
fields themselves (a UUID is hex text on SQLite, a uuid on PostgreSQL), and the rows become Node instances exactly
as the ORM would make them (`audit.statements.from_row`), without a raw queryset's per-call column mapping.
Their behaviour is pinned by the DAG, retry and fan-out tests and their cost by tests/sagas/test_hot_path_queries.py.
"""

from __future__ import annotations

import uuid
from functools import cache
from typing import Any

from django.db import connection
from django.db.models import Q, QuerySet
from django.db.models.functions import Now

from audit import statements
from registry.models import ActionDefinition
from sagas.coordinator._tx import Tx
from sagas.models import Node, NodeDependency, Saga
from sagas.states import NodeStatus, SagaStatus


def _prep(model: Any, field: str, value: Any) -> Any:
    return model._meta.get_field(field).get_db_prep_value(value, connection)


@cache
def _now_sql(vendor: str) -> str:
    """The database clock, as the ORM writes it for this backend (retry backoffs were set from that clock)."""
    query = Node.objects.all().query
    # compiler.compile picks the backend's own form (as_sqlite, as_postgresql), exactly as a lookup would.
    sql, _ = query.get_compiler(connection=connection).compile(Now().resolve_expression(query))
    return str(sql)


@cache
def _tables(vendor: str) -> dict[str, str]:
    quote = connection.ops.quote_name
    return {
        "node": quote(Node._meta.db_table),
        "dep": quote(NodeDependency._meta.db_table),
        "contract": quote(ActionDefinition._meta.db_table),
    }


def ready_nodes(saga_id: uuid.UUID, limit: int, only: uuid.UUID | None = None) -> list[Node]:
    """READY nodes of the saga that are due (planning order), each carrying the saga's EXECUTING count and its
    pinned registry row (active flag, hash and stored text; see `pinned_contract_row`), so a claim needs no
    registry read of its own."""
    params: list[Any] = [NodeStatus.EXECUTING, _prep(Node, "id", saga_id), NodeStatus.READY]
    if only is not None:
        params.append(_prep(Node, "id", only))
    params.append(limit)
    return _nodes(_ready_sql(connection.vendor, only is not None), params, READY_EXTRAS)


# Columns the ready query adds after the node's own, set as attributes of each node it returns.
READY_EXTRAS = ("executing", "contract_active", "contract_hash", "contract_text")


@cache
def _ready_sql(vendor: str, one_node: bool) -> str:
    t = _tables(vendor)
    sql = (
        f"SELECT {statements.select_columns(Node, 'n')}, "
        f'(SELECT COUNT(*) FROM {t["node"]} e WHERE e."saga_id" = n."saga_id" AND e."status" = %s) AS "executing", '
        f'a."active", a."definition_hash", CAST(a."definition" AS TEXT) FROM {t["node"]} n '
        f'LEFT JOIN {t["contract"]} a ON a."action_id" = n."action" AND a."version" = n."action_version" '
        f'WHERE n."saga_id" = %s AND n."status" = %s '
        f'AND (n."next_attempt_at" IS NULL OR n."next_attempt_at" <= {_now_sql(vendor)})'
    )
    if one_node:
        sql += ' AND n."id" = %s'
    return sql + ' ORDER BY n."position" LIMIT %s'


def _nodes(sql: str, params: list[Any], extras: tuple[str, ...] = ()) -> list[Node]:
    """Node instances from rows whose first columns are the node's own (statements.select_columns), converted as
    the ORM converts them, with the `extras` columns after them set as attributes."""
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    width = len(Node._meta.concrete_fields)
    nodes = []
    for row in rows:
        node = statements.from_row(Node, row[:width])
        for name, value in zip(extras, row[width:], strict=True):
            setattr(node, name, value)
        nodes.append(node)
    return nodes


def pinned_contract_row(node: Node) -> tuple[bool | None, str | None, str | None] | None:
    """The registry row a node from `ready_nodes` pinned, as that query read it, or None for a node read otherwise."""
    if not hasattr(node, "contract_text"):
        return None
    active, digest, text = (getattr(node, name) for name in READY_EXTRAS[1:])  # columns of the query, not fields
    return (None if active is None else bool(active)), digest, text


def dependants_now_ready(node: Node) -> list[Node]:
    """Dependants of `node` still WAITING_DEPENDENCY whose dependencies have all COMPLETED, in planning order.

    Bounded by the saga and driven by the dependency index, so no stale statistics can make it scan other sagas.
    """
    node_id = _prep(Node, "id", node.pk)
    params = [_prep(Node, "id", node.saga_id), NodeStatus.WAITING_DEPENDENCY, node_id, NodeStatus.COMPLETED]
    return _nodes(_dependants_sql(connection.vendor), params)


@cache
def _dependants_sql(vendor: str) -> str:
    t = _tables(vendor)
    return (
        f"SELECT {statements.select_columns(Node, 'n')} FROM {t['node']} n "
        f'WHERE n."saga_id" = %s AND n."status" = %s '
        f'AND n."id" IN (SELECT d."node_id" FROM {t["dep"]} d WHERE d."depends_on_id" = %s) '
        f'AND NOT EXISTS (SELECT 1 FROM {t["dep"]} u INNER JOIN {t["node"]} u2 ON u."depends_on_id" = u2."id" '
        f'WHERE u."node_id" = n."id" AND u2."status" <> %s) ORDER BY n."position"'
    )


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
    rows = ready_nodes(saga.id, saga.run_max_parallel, only)
    if not rows:
        return []
    free = min(saga.run_max_parallel - getattr(rows[0], "executing"), saga.run_steps_left)  # noqa: B009
    return rows[: max(0, free)]


def capacity(tx: Tx) -> int:
    """How many more attempts the saga's current run may start now, across all workers."""
    if tx.saga.status != SagaStatus.ACTIVE:
        return 0
    return max(0, min(tx.saga.run_max_parallel - executing_count(tx.saga), tx.saga.run_steps_left))
