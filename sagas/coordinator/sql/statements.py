"""The coordinator's hand-written statements, each by name; the SQL behind them is built once per backend.

Writes: `insert_saga`, `insert_steps`, `insert_events` (the rows `audit.chain.link` made), `update_row` and
`cas_status` (a compare-and-set on the status column). Reads: `lock_saga` (the saga row under lock, with "is a kill
switch engaged?" in the same query), `node_and_step` (a fence check, made in the lock's round trip),
`step_of_saga`, `node_by_id`, `ready_nodes` (with the saga's EXECUTING count and each node's pinned registry row),
`dependants_ready`, `action_rows` (the registry rows an action call may pin) and `tenant_stopped`.

Why hand-written: building these through the ORM cost several times what the database spends answering them
(docs/benchmarks.md, "Where a chained step's time goes"). Each is plain SQL that SQLite and PostgreSQL read alike
(the clock and the lock clause excepted), values are prepared by the model fields themselves, and rows become
model instances exactly as the ORM would make them (`rows.from_row`). Behaviour is pinned by the saga, DAG, retry
and fan-out tests, cost by tests/sagas/test_hot_path_queries.py. `.ci/grep-checks` keeps `cursor.execute` in this
package.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from functools import cache
from typing import Any

from django.db import connection, models

from audit.models import AuditEvent
from governance.models import KillSwitch
from registry.models import ActionDefinition
from sagas.coordinator.sql import pipeline, rows
from sagas.models import Node, NodeDependency, ProxyCallIntent, Saga, Step
from sagas.states import NodeStatus, SagaKind, SagaStatus

SqlQuery = rows.SqlQuery

# --- writes ---------------------------------------------------------------------------------------------------------


def insert_saga(saga: Saga) -> None:
    """INSERT a new saga row (its primary key set); the instance is then marked saved."""
    rows.insert([saga])


def insert_steps(steps: Sequence[Step]) -> None:
    """INSERT new step rows (the write-ahead journal entry of an attempt, or steps recorded whole) in one statement."""
    rows.insert(steps)


def insert_events(events: Sequence[AuditEvent]) -> None:
    """INSERT the audit events `audit.chain.link` made, hashes and sequence as they are, in one statement."""
    rows.insert(events)


def insert_intent(intent: ProxyCallIntent, tenant_id: str, lease_seconds: float) -> bool:
    """INSERT a proxied call's intent (its lease deadline `lease_seconds` from the database's now) only while its
    session (a saga of kind PROXY_SESSION) is ACTIVE in `tenant_id`, not a preview, and no kill switch is engaged
    for the tenant or the session; whether it was.

    One statement, its own commit (the proxy's journal threads run in autocommit). On PostgreSQL it takes the
    session's row FOR KEY SHARE: it does not wait for the proxy's own transactions on the session (which hold the row
    FOR NO KEY UPDATE), but it waits for any other transaction on it, which holds the row FOR UPDATE from before it
    reads the intents (`lock_saga_for_intents`), and then checks the row as that transaction left it: no intent is
    made that a transaction ending the session did not see."""
    deadline, interval = rows.deadline_sql(connection.vendor, lease_seconds)
    arguments = ProxyCallIntent._meta.get_field("arguments").get_db_prep_save(intent.arguments, connection)
    params = [
        rows.pk_param(ProxyCallIntent, intent.id),
        intent.call,
        arguments,
        intent.principal_id,
        intent.principal_type,
        intent.lease_owner,
        interval,
        _prep(ProxyCallIntent, "created_at", intent.created_at),
        rows.pk_param(Saga, intent.saga_id),
        tenant_id,
        SagaStatus.ACTIVE.value,
        False,
        SagaKind.PROXY_SESSION.value,
    ]
    with connection.cursor() as cursor:
        cursor.execute(_intent_sql(connection.vendor, deadline), params)
        return int(cursor.rowcount) == 1


@cache
def _intent_sql(vendor: str, deadline: str) -> str:
    quote = connection.ops.quote_name
    intent, saga, switch = (quote(m._meta.db_table) for m in (ProxyCallIntent, Saga, KillSwitch))
    names = ("id", "saga_id", "call", "arguments", "principal_id", "principal_type", "lease_owner")
    columns = ", ".join(quote(name) for name in (*names, "lease_expires_at", "created_at"))
    sql = (
        f"INSERT INTO {intent} ({columns}) SELECT %s, s.{quote('id')}, %s, %s, %s, %s, %s, {deadline}, %s "
        f"FROM {saga} s WHERE s.{quote('id')} = %s AND s.{quote('tenant_id')} = %s AND s.{quote('status')} = %s "
        f"AND s.{quote('preview')} = %s AND s.{quote('kind')} = %s "
        f"AND NOT EXISTS (SELECT 1 FROM {switch} k WHERE k.{quote('tenant_id')} = s.{quote('tenant_id')} "
        f"AND (k.{quote('saga_id')} IS NULL OR k.{quote('saga_id')} = s.{quote('id')}))"
    )
    return sql + " FOR KEY SHARE OF s" if vendor == "postgresql" else sql


def delete_intents(pks: Sequence[uuid.UUID]) -> None:
    """DELETE the intents `pks` (turned into steps in this transaction)."""
    rows.delete(ProxyCallIntent, pks)


def update_row(model: type[models.Model], pk: Any, values: dict[str, Any]) -> None:
    """UPDATE the columns `values` of one row by primary key (a row whose state this transaction holds)."""
    rows.update(model, pk, values)


def cas_status(model: type[models.Model], pk: Any, expect: str, values: dict[str, Any], *, stale_message: str) -> bool:
    """UPDATE one row by primary key only while its status is `expect` (a compare and set); whether it did.

    Queued in a pipelined transaction, it is taken as done: a row that had changed fails the whole transaction
    with `pipeline.StaleWrite(stale_message)` before it commits (the check `saga_expect_rows` travels with it)."""
    return rows.update(model, pk, values, expect_status=expect, stale_message=stale_message) == 1


# --- reads ----------------------------------------------------------------------------------------------------------


def lock_saga(
    pk: uuid.UUID, tenant_id: str | None, *, skip_locked: bool = False, also: Sequence[SqlQuery] = ()
) -> tuple[Saga | None, list[list[tuple[Any, ...]]]]:
    """The saga row locked FOR NO KEY UPDATE (in the tenant `tenant_id`, unless it is None: the coordinator's own
    sweeps), with `kill_switched` set: a tenant-wide or saga switch is engaged, answered by the same query.

    `also` are reads to make right after the lock, in the same round trip on PostgreSQL (the rows a record checks
    its fence against); their rows come back in order, and mean nothing if the saga was not found."""
    params: list[Any] = [rows.pk_param(Saga, pk)]
    if tenant_id is not None:
        params.append(tenant_id)
    lock = (_lock_sql(connection.vendor, tenant_id is not None, skip_locked), params)
    found, *extra = pipeline.read_together([lock, *also])
    if not found:
        return None, extra
    row = found[0]
    saga = rows.from_row(Saga, row)
    saga.kill_switched = bool(row[-1])  # type: ignore[attr-defined]
    return saga, extra


@cache
def _lock_sql(vendor: str, scoped: bool, skip_locked: bool) -> str:
    quote = connection.ops.quote_name
    saga, switch = quote(Saga._meta.db_table), quote(KillSwitch._meta.db_table)
    engaged = (
        f"EXISTS (SELECT 1 FROM {switch} k WHERE k.{quote('tenant_id')} = s.{quote('tenant_id')} "
        f"AND (k.{quote('saga_id')} IS NULL OR k.{quote('saga_id')} = s.{quote('id')}))"
    )
    where = f"s.{quote('id')} = %s" + (f" AND s.{quote('tenant_id')} = %s" if scoped else "")
    sql = f"SELECT {rows.select_columns(Saga, 's')}, {engaged} FROM {saga} s WHERE {where}"
    if connection.features.has_select_for_update:
        sql += " " + connection.ops.for_update_sql(skip_locked=skip_locked, no_key=True)
    return sql


def node_and_step(node_id: Any, step_id: Any) -> SqlQuery:
    """The query for a node and its step in one row, to pass as `lock_saga(also=...)`; see `node_and_step_from`."""
    return rows.select_two_query(Node, node_id, Step, step_id)


def node_and_step_from(found: list[tuple[Any, ...]]) -> tuple[Node, Step] | None:
    """The node and step of a `node_and_step` query's rows, or None when either is gone."""
    return rows.two_from_row(Node, Step, found[0] if found else None)


def step_of_saga(step_pk: uuid.UUID, saga_pk: uuid.UUID) -> Step | None:
    return rows.select_one(Step, step_pk, saga=saga_pk)


def step_of_saga_query(step_pk: uuid.UUID, saga_pk: uuid.UUID) -> SqlQuery:
    """step_of_saga's query, to pass as `lock_saga(also=...)`; see `step_from`."""
    return rows.select_one_query(Step, step_pk, saga=saga_pk)


def intents_under_lock(saga_pk: uuid.UUID) -> list[ProxyCallIntent]:
    """A proxy session's intents, read after its row is locked FOR UPDATE (in the same round trip on PostgreSQL):
    a transaction that is not the proxy's own then sees every intent made before it and makes the ones after it
    wait for its end (`insert_intent`)."""
    reads = [_lock_for_intents_query(saga_pk), intents_of_saga_query(saga_pk)] if _pg() else []
    found = pipeline.read_together(reads or [intents_of_saga_query(saga_pk)])[-1]
    return intents_from(found)


def _lock_for_intents_query(saga_pk: uuid.UUID) -> SqlQuery:
    quote = connection.ops.quote_name
    sql = f"SELECT 1 FROM {quote(Saga._meta.db_table)} WHERE {quote('id')} = %s FOR UPDATE"
    return sql, [rows.pk_param(Saga, saga_pk)]


def _pg() -> bool:
    return connection.vendor == "postgresql"


def intents_of_saga_query(saga_pk: uuid.UUID) -> SqlQuery:
    """The query for a session's proxied-call intents, oldest first, to pass as `lock_saga(also=...)`."""
    quote = connection.ops.quote_name
    table = quote(ProxyCallIntent._meta.db_table)
    order = f"t.{quote('created_at')}, t.{quote('id')}"
    columns = rows.select_columns(ProxyCallIntent, "t")
    sql = f"SELECT {columns} FROM {table} t WHERE t.{quote('saga_id')} = %s ORDER BY {order}"
    return sql, [rows.pk_param(Saga, saga_pk)]


def intents_from(found: list[tuple[Any, ...]]) -> list[ProxyCallIntent]:
    return [rows.from_row(ProxyCallIntent, row) for row in found]


def step_from(found: list[tuple[Any, ...]]) -> Step | None:
    """The step of a `step_of_saga_query`'s rows, or None when it is not there."""
    return rows.from_row(Step, found[0]) if found else None


def node_by_id(node_pk: uuid.UUID) -> Node | None:
    return rows.select_one(Node, node_pk)


# Columns the ready query adds after the node's own, set as attributes of each node it returns.
READY_EXTRAS = ("executing", "contract_active", "contract_hash", "contract_text")


def ready_nodes(saga_id: uuid.UUID, limit: int, only: uuid.UUID | None = None) -> list[Node]:
    """READY nodes of the saga that are due (planning order), each carrying the saga's EXECUTING count and its
    pinned registry row (active flag, hash and stored text, as `READY_EXTRAS` attributes), so a claim needs no
    registry read of its own."""
    params: list[Any] = [NodeStatus.EXECUTING, _prep(Node, "id", saga_id), NodeStatus.READY]
    if only is not None:
        params.append(_prep(Node, "id", only))
    params.append(limit)
    return _nodes(_ready_sql(connection.vendor, only is not None), params, READY_EXTRAS)


@cache
def _ready_sql(vendor: str, one_node: bool) -> str:
    t = _tables(vendor)
    sql = (
        f"SELECT {rows.select_columns(Node, 'n')}, "
        f'(SELECT COUNT(*) FROM {t["node"]} e WHERE e."saga_id" = n."saga_id" AND e."status" = %s) AS "executing", '
        f'a."active", a."definition_hash", CAST(a."definition" AS TEXT) FROM {t["node"]} n '
        f'LEFT JOIN {t["contract"]} a ON a."action_id" = n."action" AND a."version" = n."action_version" '
        f'WHERE n."saga_id" = %s AND n."status" = %s '
        f'AND (n."next_attempt_at" IS NULL OR n."next_attempt_at" <= {rows.now_sql(vendor)})'
    )
    if one_node:
        sql += ' AND n."id" = %s'
    return sql + ' ORDER BY n."position" LIMIT %s'


def dependants_ready(node: Node) -> list[Node]:
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
        f"SELECT {rows.select_columns(Node, 'n')} FROM {t['node']} n "
        f'WHERE n."saga_id" = %s AND n."status" = %s '
        f'AND n."id" IN (SELECT d."node_id" FROM {t["dep"]} d WHERE d."depends_on_id" = %s) '
        f'AND NOT EXISTS (SELECT 1 FROM {t["dep"]} u INNER JOIN {t["node"]} u2 ON u."depends_on_id" = u2."id" '
        f'WHERE u."node_id" = n."id" AND u2."status" <> %s) ORDER BY n."position"'
    )


StoredRow = tuple[str, bool, str, str]  # version, active, definition_hash, definition as stored text


def action_rows(action_id: str, version: str | None = None) -> list[StoredRow]:
    """The registry rows `registry.selectors.action_get` would choose from, undecoded: the given version, or the
    active ones (sagas.coordinator._actions decodes a stored text once per process)."""
    params: list[Any] = [action_id, version if version is not None else True]
    with connection.cursor() as cursor:
        cursor.execute(_action_rows_sql(connection.vendor, version is not None), params)
        return [(str(v), bool(active), str(digest), str(text)) for v, active, digest, text in cursor.fetchall()]


@cache
def _action_rows_sql(vendor: str, by_version: bool) -> str:
    quote = connection.ops.quote_name
    table = quote(ActionDefinition._meta.db_table)
    chosen = quote("version") if by_version else quote("active")
    return (
        f"SELECT {quote('version')}, {quote('active')}, {quote('definition_hash')}, "
        f"CAST({quote('definition')} AS TEXT) FROM {table} WHERE {quote('action_id')} = %s AND {chosen} = %s"
    )


def tenant_stopped(tenant_id: str) -> bool:
    """Whether a tenant-wide kill switch is engaged: the question every saga_begin asks (the ORM would spend
    longer building it than the database answering; `governance.kill_switch.engaged` then reads the switch)."""
    with connection.cursor() as cursor:
        cursor.execute(_tenant_stopped_sql(connection.vendor), [tenant_id])
        return cursor.fetchone() is not None


@cache
def _tenant_stopped_sql(vendor: str) -> str:
    quote = connection.ops.quote_name
    table = quote(KillSwitch._meta.db_table)
    return f"SELECT 1 FROM {table} WHERE {quote('tenant_id')} = %s AND {quote('saga_id')} IS NULL LIMIT 1"


# --- shared parts ---------------------------------------------------------------------------------------------------


def _prep(model: Any, field: str, value: Any) -> Any:
    return model._meta.get_field(field).get_db_prep_value(value, connection)


@cache
def _tables(vendor: str) -> dict[str, str]:
    quote = connection.ops.quote_name
    return {
        "node": quote(Node._meta.db_table),
        "dep": quote(NodeDependency._meta.db_table),
        "contract": quote(ActionDefinition._meta.db_table),
    }


def _nodes(sql: str, params: list[Any], extras: tuple[str, ...] = ()) -> list[Node]:
    """Node instances from rows whose first columns are the node's own (rows.select_columns), converted as the
    ORM converts them, with the `extras` columns after them set as attributes."""
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        found = cursor.fetchall()
    width = len(Node._meta.concrete_fields)
    nodes = []
    for row in found:
        node = rows.from_row(Node, row[:width])
        for name, value in zip(extras, row[width:], strict=True):
            setattr(node, name, value)
        nodes.append(node)
    return nodes
