"""Writes of one coordinator transaction held back and sent together with the next statement that needs an
answer, in one round trip (PostgreSQL pipeline mode); the last ones travel with COMMIT.

A chained step reads a few things (the saga lock, the fence check, which nodes are ready) and writes many (the
outcome, the promotion, the next claim, its write-ahead step, the audit events, the saga row). Sent one by one,
each write waits for its own round trip, and on a busy machine for the PostgreSQL backend to be scheduled again.
Inside `write_behind()`, the row statements (`sagas.coordinator.sql.rows`) queue their INSERTs and UPDATEs
instead; the queue is sent, in order, in the same pipeline as whatever statement runs next on the connection (a
Django execute wrapper sees every statement), and `finish()` sends what is left with the COMMIT. The server runs
exactly the statements, in exactly the order, it ran before; only the waiting between them is gone.

A compare-and-set cannot report its row count back in time, so a queued one carries its own check: it runs as
`WITH changed AS (UPDATE ... RETURNING 1) SELECT saga_expect_rows(COUNT(*), 1, <message>) FROM changed`, and the
function (installed by sagas migration 0010) raises when no row matched. The error aborts the transaction on the
server before its COMMIT, and reaches the caller as `StaleWrite` with the message the caller gave.

SQLite, PgBouncer-less setups without pipeline support, `SAGA_PG_PIPELINE=false` and nested (test-case)
transactions keep writing each statement as it is made.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from django.conf import settings
from django.db import DatabaseError, connections
from django.db.backends.base.base import BaseDatabaseWrapper

# The hint the check function raises with, which tells a stale compare-and-set from any other error.
STALE_HINT = "saga-stale-write"
_ATTRIBUTE = "saga_write_behind"


class StaleWrite(Exception):
    """A queued compare-and-set found its row changed by someone else; the transaction did not commit."""


class WriteBehind:
    """The queued writes of one transaction on one connection (a Django execute wrapper while active)."""

    def __init__(self, connection: BaseDatabaseWrapper) -> None:
        self.connection = connection
        self._pending: list[tuple[str, list[Any], bool]] = []
        self._sending = False

    def queue(self, sql: str, params: list[Any], *, many: bool = False) -> None:
        """Hold `sql` until the next statement that needs an answer; `many`: run once per list in `params`."""
        self._pending.append((sql, params, many))

    def __call__(self, execute: Callable[..., Any], sql: str, params: Any, many: bool, context: dict[str, Any]) -> Any:
        if self._sending or not self._pending:
            return execute(sql, params, many, context)
        if _server_side(context):
            self._send()  # a named cursor cannot run in a pipeline: the queue goes first, on its own
            return execute(sql, params, many, context)
        with self._pipeline():
            self._send_queued()
            return execute(sql, params, many, context)

    def read_together(self, queries: list[tuple[str, list[Any]]]) -> list[list[tuple[Any, ...]]]:
        """Every row of each query, the queries (and what is queued before them) sent in one round trip."""
        cursors = [self.connection.cursor() for _ in queries]
        try:
            with self._pipeline():
                self._send_queued()
                for cursor, (sql, params) in zip(cursors, queries, strict=True):
                    cursor.execute(sql, params)
            return [list(cursor.fetchall()) for cursor in cursors]
        finally:
            for cursor in cursors:
                cursor.close()

    def finish(self, *, commit: bool) -> None:
        """Send what is queued; with `commit`, COMMIT in the same round trip (the caller's atomic block then finds
        the transaction already committed, and runs its on-commit hooks as usual)."""
        if not self._pending:
            return
        with self._pipeline():
            self._send_queued()
            if commit:
                # As a statement of the pipeline, never prepared. psycopg's commit() here would add a sync of its own,
                # and Django's COMMIT after the pipeline a round trip per transaction: begin + execute measured about
                # 7% slower either way (A/B on PostgreSQL, 2026-12-04). Django's atomic block then finds the
                # transaction committed (psycopg's commit() of an idle connection sends nothing) and runs its hooks.
                self.connection.connection.execute("COMMIT", prepare=False)

    def _send(self) -> None:
        with self._pipeline():
            self._send_queued()

    def _send_queued(self) -> None:
        pending, self._pending = self._pending, []
        self._sending = True
        try:
            with self.connection.cursor() as cursor:
                for sql, params, many in pending:
                    if many:
                        cursor.executemany(sql, params)
                    else:
                        cursor.execute(sql, params)
        finally:
            self._sending = False

    @contextmanager
    def _pipeline(self) -> Iterator[None]:
        """psycopg pipeline mode; errors come back as Django's, a failed check as StaleWrite."""
        try:
            with self.connection.wrap_database_errors, self.connection.connection.pipeline():
                yield
        except DatabaseError as error:
            stale = _stale_message(error)
            if stale is not None:
                raise StaleWrite(stale) from None
            raise


@contextmanager
def write_behind(using: str = "default") -> Iterator[WriteBehind | None]:
    """Queue this transaction's statements writes (see the module doc) until the next read or `finish()`.

    Yields None, and changes nothing, where pipelines are not used; nested inside an active one, yields that one.
    """
    connection = connections[using]
    active: WriteBehind | None = getattr(connection, _ATTRIBUTE, None)
    if active is not None or not enabled(connection):
        yield active
        return
    held = WriteBehind(connection)
    setattr(connection, _ATTRIBUTE, held)
    try:
        with connection.execute_wrapper(held):
            yield held
    finally:
        delattr(connection, _ATTRIBUTE)  # on an error the queue dies with the rolled-back transaction


def read_together(queries: list[tuple[str, list[Any]]], using: str = "default") -> list[list[tuple[Any, ...]]]:
    """Every row of each query: in one round trip inside `write_behind()`, one query after the other elsewhere."""
    held = active(using)
    if held is not None:
        return held.read_together(queries)
    rows = []
    with connections[using].cursor() as cursor:
        for sql, params in queries:
            cursor.execute(sql, params)
            rows.append(list(cursor.fetchall()))
    return rows


def active(using: str = "default") -> WriteBehind | None:
    held: WriteBehind | None = getattr(connections[using], _ATTRIBUTE, None)
    return held


def enabled(connection: BaseDatabaseWrapper) -> bool:
    if connection.vendor != "postgresql" or not getattr(settings, "SAGA_PG_PIPELINE", True):
        return False
    return pipeline_supported()


def pipeline_supported() -> bool:
    """psycopg 3 with a libpq that has pipeline mode (14 or later)."""
    try:
        import psycopg
    except ImportError:
        return False
    return bool(psycopg.Pipeline.is_supported())


def outermost(connection: BaseDatabaseWrapper) -> bool:
    """The transaction is the connection's only atomic block: COMMIT here is the transaction's real commit (inside
    another block, a test case's wrapping transaction among them, it would not be, so the queue is sent and the
    commit left to Django)."""
    return len(connection.atomic_blocks) == 1


def _server_side(context: dict[str, Any]) -> bool:
    cursor = getattr(context.get("cursor"), "cursor", None)
    return bool(getattr(cursor, "name", None))


def _stale_message(error: DatabaseError) -> str | None:
    cause = error.__cause__
    diag = getattr(cause, "diag", None)
    if diag is None or getattr(diag, "message_hint", None) != STALE_HINT:
        return None
    return str(diag.message_primary or "")
