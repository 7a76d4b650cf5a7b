"""The two reads every chained step makes, as hand-written SQL (docs/benchmarks.md, "Where a chained step's time
goes"): building these through the ORM cost several times what the database spends answering them.

Both are plain SQL that SQLite and PostgreSQL read alike; values are prepared by the model fields themselves (a UUID
is hex text on SQLite, a uuid on PostgreSQL), and the rows come back as Node instances through `Node.objects.raw`.
Their behaviour is pinned by the DAG, retry and fan-out tests and their cost by tests/sagas/test_hot_path_queries.py.
"""

from __future__ import annotations

import uuid
from functools import cache
from typing import Any

from django.db import connection
from django.db.models.functions import Now

from sagas.models import Node, NodeDependency
from sagas.states import NodeStatus as N


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
    return {"node": quote(Node._meta.db_table), "dep": quote(NodeDependency._meta.db_table)}


def ready_nodes(saga_id: uuid.UUID, limit: int, only: uuid.UUID | None = None) -> list[Node]:
    """READY nodes of the saga that are due (planning order), each carrying the saga's EXECUTING count."""
    t = _tables(connection.vendor)
    sql = (
        f'SELECT n.*, (SELECT COUNT(*) FROM {t["node"]} e WHERE e."saga_id" = n."saga_id" AND e."status" = %s) '
        f'AS "executing" FROM {t["node"]} n WHERE n."saga_id" = %s AND n."status" = %s '
        f'AND (n."next_attempt_at" IS NULL OR n."next_attempt_at" <= {_now_sql(connection.vendor)})'
    )
    params: list[Any] = [N.EXECUTING, _prep(Node, "id", saga_id), N.READY]
    if only is not None:
        sql += ' AND n."id" = %s'
        params.append(_prep(Node, "id", only))
    sql += ' ORDER BY n."position" LIMIT %s'
    params.append(limit)
    return list(Node.objects.raw(sql, params))


def dependants_now_ready(node: Node) -> list[Node]:
    """Dependants of `node` still WAITING_DEPENDENCY whose dependencies have all COMPLETED, in planning order.

    Bounded by the saga and driven by the dependency index, so no stale statistics can make it scan other sagas.
    """
    t = _tables(connection.vendor)
    sql = (
        f'SELECT n.* FROM {t["node"]} n WHERE n."saga_id" = %s AND n."status" = %s '
        f'AND n."id" IN (SELECT d."node_id" FROM {t["dep"]} d WHERE d."depends_on_id" = %s) '
        f'AND NOT EXISTS (SELECT 1 FROM {t["dep"]} u INNER JOIN {t["node"]} u2 ON u."depends_on_id" = u2."id" '
        f'WHERE u."node_id" = n."id" AND u2."status" <> %s) ORDER BY n."position"'
    )
    node_id = _prep(Node, "id", node.pk)
    params = [_prep(Node, "id", node.saga_id), N.WAITING_DEPENDENCY, node_id, N.COMPLETED]
    return list(Node.objects.raw(sql, params))
