"""Plain rows of any model written and read with SQL text built once per shape, not by the ORM on every call.

Building a query is most of what a short coordinator transaction costs here: on this machine the ORM takes about
0.8 ms to compile the saga lock query that PostgreSQL answers in 0.13 ms, and 0.3 ms to build a one-row UPDATE
(docs/benchmarks.md, "Where the time goes"). The SQL text is cached by (database, model, the columns involved), and
values are prepared exactly as the ORM prepares them (`Field.pre_save`, `Field.get_db_prep_save`, the backend's and
the field's converters on the way back), so rows written here read back through the ORM unchanged and vice versa.

What is left to the ORM: relations, and any filter but the primary key (plus, for a compare-and-set, the status
column). The one database-computed value the hot path writes, a deadline from the database's clock
(`FromNow`), is written out here per backend, the same SQL the ORM's compiler makes of it; any other expression is
refused. Statements still go through Django's cursor wrapper, so query counting
(tests/sagas/test_hot_path_queries.py) and instrumentation see them.

The machinery under the named statements of `sagas.coordinator.sql.statements`; nothing else calls it.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import Any, TypeVar

from django.db import connections, models
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models.functions import Now

from sagas.coordinator.sql import pipeline as write_behind

M = TypeVar("M", bound=models.Model)
N = TypeVar("N", bound=models.Model)
Converter = Callable[[Any, Any, BaseDatabaseWrapper], Any]


class FromNow(models.ExpressionWrapper):  # type: ignore[type-arg]
    """The database's now() + `seconds` (lease deadlines, retry times): an expression the ORM compiles as usual
    (filters, `QuerySet.update`), and that the row statements here write out themselves (`_from_now_sql`)."""

    def __init__(self, seconds: float) -> None:
        super().__init__(Now() + models.Value(timedelta(seconds=seconds)), output_field=models.DateTimeField())
        self.seconds = seconds


def insert(objs: Sequence[M], using: str = "default") -> Sequence[M]:
    """INSERT the new rows `objs` (one model, primary keys already set) in one statement; like bulk_create, the
    objects are then marked saved. auto_now and auto_now_add fields are stamped by their own pre_save.

    On PostgreSQL, several rows alike go as one row's INSERT executed for each (`executemany`, in the same round
    trip): psycopg caches the conversion of a statement of at most 50 parameters only, and re-parsing a many-row
    INSERT's text cost more than the rows (a batch of reads' steps and events: docs/benchmarks.md)."""
    if not objs:
        return objs
    model = type(objs[0])
    connection = connections[using]
    placeholders: list[tuple[str, ...]] = []
    params: list[list[Any]] = []
    for obj in objs:
        row = [_value(field, field.pre_save(obj, True), connection) for field in _concrete_fields(model)]
        placeholders.append(tuple(sql for sql, _ in row))
        params.append([param for _, values in row for param in values])
    many = connection.vendor == "postgresql" and len(objs) > 1 and len(set(placeholders)) == 1
    if many:
        _execute(using, _insert_sql(using, model, (placeholders[0],)), params, many=True)
    else:
        flat = [param for row_params in params for param in row_params]
        _execute(using, _insert_sql(using, model, tuple(placeholders)), flat, many=False)
    for obj in objs:
        obj._state.adding = False
        obj._state.db = using
    return objs


def delete(model: type[models.Model], pks: Sequence[Any], using: str = "default") -> None:
    """DELETE the rows with primary keys `pks` in one statement (queued inside write_behind(), like the writes)."""
    if not pks:
        return
    quote = connections[using].ops.quote_name
    marks = ", ".join(["%s"] * len(pks))
    sql = f"DELETE FROM {quote(model._meta.db_table)} WHERE {quote(_column(model._meta.pk))} IN ({marks})"
    _execute(using, sql, [pk_param(model, pk, using) for pk in pks], many=False)


def _execute(using: str, sql: str, params: list[Any], *, many: bool) -> None:
    """Run (or, inside write_behind(), queue) one statement; `many`: once per parameter list in `params`."""
    queue = write_behind.active(using)
    if queue is not None:
        queue.queue(sql, params, many=many)
        return
    with connections[using].cursor() as cursor:
        if many:
            cursor.executemany(sql, params)
        else:
            cursor.execute(sql, params)


def update(
    model: type[models.Model],
    pk: Any,
    values: dict[str, Any],
    *,
    expect_status: str | None = None,
    stale_message: str = "",
    using: str = "default",
) -> int:
    """UPDATE one row by primary key (and, with `expect_status`, only while its status is that: a compare and
    set); returns the rows changed. A model instance given for a foreign key writes its primary key; a database
    deadline from the database's clock (`FromNow`) is written as the ORM would write it.

    Inside `write_behind()` the statement is queued and 1 returned: a compare-and-set that then finds no row fails
    the transaction with `StaleWrite(stale_message)` before it commits (`sagas.coordinator.sql.pipeline`)."""
    connection = connections[using]
    assignments: list[tuple[str, str]] = []
    params: list[Any] = []
    for name, value in values.items():
        field = model._meta.get_field(name)
        assert isinstance(field, models.Field), f"{model.__name__}.{name} is a relation, not a column"
        sql, found = _value(field, value, connection)
        assignments.append((_column(field), sql))
        params.extend(found)
    params.append(pk_param(model, pk, using))
    if expect_status is not None:
        params.append(expect_status)
    sql = _update_sql(using, model, tuple(assignments), expect_status is not None)
    queue = write_behind.active(using)
    if queue is not None:
        if expect_status is not None:
            sql, params = _checked(sql), [*params, stale_message or f"{model.__name__} {pk} changed first"]
        queue.queue(sql, params)
        return 1
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return int(cursor.rowcount)


def select_one(model: type[M], pk: Any, using: str = "default", **equal: Any) -> M | None:
    """The row with primary key `pk` (and columns equal to `equal`, e.g. its saga), or None."""
    sql, params = select_one_query(model, pk, using, **equal)
    with connections[using].cursor() as cursor:
        cursor.execute(sql, params)
        row = cursor.fetchone()
    return None if row is None else from_row(model, row, using)


SqlQuery = tuple[str, list[Any]]


def select_one_query(model: type[M], pk: Any, using: str = "default", **equal: Any) -> SqlQuery:
    """select_one's query (its SQL and parameters), to run with other reads in one round trip
    (write_behind.read_together); its row, if any, makes the instance with `from_row`."""
    connection = connections[using]
    params = [pk_param(model, pk, using)]
    for name, value in equal.items():
        field = model._meta.get_field(name)
        params.append(field.get_db_prep_value(value, connection))  # type: ignore[union-attr]
    return _select_sql(using, model, tuple(equal)), params


def select_two_query(
    first: type[M], first_pk: Any, second: type[N], second_pk: Any, using: str = "default"
) -> SqlQuery:
    """The rows `first_pk` of `first` and `second_pk` of `second` in one query (a node and its step): its SQL and
    parameters, to run with other reads in one round trip (write_behind.read_together); see `two_from_row`."""
    params = [pk_param(first, first_pk, using), pk_param(second, second_pk, using)]
    return _select_two_sql(using, first, second), params


def two_from_row(
    first: type[M], second: type[N], row: Sequence[Any] | None, using: str = "default"
) -> tuple[M, N] | None:
    """The two instances in a row of `select_two_query`, or None for no row."""
    if row is None:
        return None
    split = len(_concrete_fields(first))
    return from_row(first, row[:split], using), from_row(second, row[split:], using)


def select_columns(model: type[models.Model], alias: str, using: str = "default") -> str:
    """The column list of `model`'s concrete fields under table alias `alias`, in from_row's order."""
    quote = connections[using].ops.quote_name
    return ", ".join(f"{quote(alias)}.{quote(_column(field))}" for field in _concrete_fields(model))


def from_row(model: type[M], row: Sequence[Any], using: str = "default") -> M:
    """The model instance for a row whose first columns are select_columns(model, ...), converted as the ORM
    converts them (JSON decoded, datetimes made aware, ...)."""
    connection = connections[using]
    names, converters = _readers(using, model)
    values = []
    for value, (field, field_converters) in zip(row, converters, strict=False):
        for convert in field_converters:
            value = convert(value, field, connection)
        values.append(value)
    return model.from_db(using, names, values)


def pk_param(model: type[models.Model], pk: Any, using: str = "default") -> Any:
    """A primary key value as the database expects it (a UUID is text on SQLite)."""
    primary_key = model._meta.pk
    assert primary_key is not None, f"{model.__name__} has no primary key"
    return primary_key.get_db_prep_value(pk, connections[using])


# --- the cached SQL -------------------------------------------------------------------------------------------------


def _concrete_fields(model: type[models.Model]) -> list[models.Field[Any, Any]]:
    return list(model._meta.concrete_fields)


# Fields whose database value is the Python value itself when it has the field's own type (or is None): the ORM's
# get_db_prep_save would return it unchanged, after a few calls per column that a row's insert pays some twenty times.
_PLAIN_FIELDS: dict[type[Any], tuple[type[Any], ...]] = {
    models.CharField: (str,),
    models.TextField: (str,),
    models.IntegerField: (int,),
    models.PositiveIntegerField: (int,),
    models.PositiveBigIntegerField: (int,),
    models.BigIntegerField: (int,),
    models.BooleanField: (bool,),
}


def _value(field: Any, value: Any, connection: BaseDatabaseWrapper) -> tuple[str, list[Any]]:
    """One column's placeholder and parameters, as the ORM's insert and update compilers make them."""
    plain = _PLAIN_FIELDS.get(type(field))
    if plain is not None and (value is None or type(value) in plain):
        return "%s", [value]
    if isinstance(value, FromNow):
        return _from_now_sql(connection.vendor), [_interval(connection.vendor, value.seconds)]
    if hasattr(value, "resolve_expression"):
        raise TypeError(f"{field} = {value!r}: the row statements write plain values and FromNow deadlines only")
    if isinstance(value, models.Model):
        value = value.pk
    return "%s", [field.get_db_prep_save(value, connection)]


def _column(field: Any) -> str:
    column = field.column
    assert isinstance(column, str), f"{field} has no database column"
    return column


def now_sql(vendor: str) -> str:
    """The database clock, as the ORM writes `Now()` for this backend (retry backoffs are set from that clock)."""
    if vendor == "postgresql":
        return "STATEMENT_TIMESTAMP()"
    assert vendor == "sqlite", f"no clock SQL for {vendor}"
    return "STRFTIME('%%Y-%%m-%%d %%H:%%M:%%f', 'NOW')"


def deadline_sql(vendor: str, seconds: float) -> tuple[str, Any]:
    """The database's now() + `seconds` as SQL and its one parameter (what a FromNow deadline is written as)."""
    return _from_now_sql(vendor), _interval(vendor, seconds)


def _from_now_sql(vendor: str) -> str:
    """`Now() + <duration>` as the ORM compiles it: interval arithmetic on PostgreSQL, Django's own SQLite
    function on SQLite (which stores datetimes as text)."""
    if vendor == "postgresql":
        return f"({now_sql(vendor)} + %s)"
    return f"(django_format_dtdelta('+', {now_sql(vendor)}, %s))"


def _interval(vendor: str, seconds: float) -> Any:
    duration = timedelta(seconds=seconds)
    return duration if vendor == "postgresql" else duration // timedelta(microseconds=1)


@functools.lru_cache(maxsize=256)
def _insert_sql(using: str, model: type[models.Model], rows: tuple[tuple[str, ...], ...]) -> str:
    quote = connections[using].ops.quote_name
    columns = ", ".join(quote(_column(field)) for field in _concrete_fields(model))
    values = ", ".join("(" + ", ".join(row) + ")" for row in rows)
    return f"INSERT INTO {quote(model._meta.db_table)} ({columns}) VALUES {values}"


@functools.lru_cache(maxsize=1024)
def _update_sql(
    using: str, model: type[models.Model], assignments: tuple[tuple[str, str], ...], compare_status: bool
) -> str:
    quote = connections[using].ops.quote_name
    meta = model._meta
    changes = ", ".join(f"{quote(column)} = {placeholder}" for column, placeholder in assignments)
    where = f"{quote(_column(meta.pk))} = %s"
    if compare_status:
        where += f" AND {quote(_column(meta.get_field('status')))} = %s"
    return f"UPDATE {quote(meta.db_table)} SET {changes} WHERE {where}"


@functools.lru_cache(maxsize=1024)
def _checked(update_sql: str) -> str:
    """A compare-and-set that fails its transaction when it changes no row (PostgreSQL; sagas migration 0010)."""
    return f"WITH changed AS ({update_sql} RETURNING 1) SELECT saga_expect_rows(COUNT(*), 1, %s) FROM changed"


@functools.lru_cache(maxsize=256)
def _select_sql(using: str, model: type[models.Model], names: tuple[str, ...]) -> str:
    quote = connections[using].ops.quote_name
    meta = model._meta
    where = " AND ".join(f"t.{quote(_column(meta.get_field(name)))} = %s" for name in names)
    where = f"t.{quote(_column(meta.pk))} = %s" + (f" AND {where}" if where else "")
    return f"SELECT {select_columns(model, 't', using)} FROM {quote(meta.db_table)} t WHERE {where}"


@functools.lru_cache(maxsize=16)
def _select_two_sql(using: str, first: type[models.Model], second: type[models.Model]) -> str:
    quote = connections[using].ops.quote_name
    tables = f"{quote(first._meta.db_table)} a, {quote(second._meta.db_table)} b"
    where = f"a.{quote(_column(first._meta.pk))} = %s AND b.{quote(_column(second._meta.pk))} = %s"
    return (
        f"SELECT {select_columns(first, 'a', using)}, {select_columns(second, 'b', using)} FROM {tables} WHERE {where}"
    )


@functools.lru_cache(maxsize=64)
def _readers(
    using: str, model: type[models.Model]
) -> tuple[list[str], list[tuple[models.Field[Any, Any], list[Converter]]]]:
    connection = connections[using]
    names, converters = [], []
    for field in _concrete_fields(model):
        column = field.get_col(model._meta.db_table)
        names.append(field.attname)
        found = connection.ops.get_db_converters(column) + column.get_db_converters(connection)
        converters.append((column, found))
    return names, converters  # type: ignore[return-value]
