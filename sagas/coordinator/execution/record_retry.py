"""A record transaction cut off by a lost database connection is tried again, with the same claim and outcome.

The outcome of an attempt is recorded in one short transaction after the action answered (phase 3,
sagas.coordinator.execution.attempts). If the database session dies meanwhile (`pg_terminate_backend`, a failover, a
network cut), the answer would be lost with it: the attempt would wait for its lease to expire and the recovery
sweep would re-run it (idempotent) or fail it as uncertain (not idempotent), although the answer had arrived.
So the record is tried again on a fresh connection, a few times with short pauses, still well inside the lease.

This is safe because the record is fenced: it writes only while the claim's fence token holds, and a record that
finds its own outcome already written under that token writes nothing (the first COMMIT went through and only
its answer was lost; `_attempts._recorded_before`). Only a lost connection is retried: any other error
(a stale fence, a deadlock, bad data) reaches the caller at once, as before.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from django.db import DatabaseError, InterfaceError, OperationalError, connection, transaction

logger = logging.getLogger("sagas.coordinator")

T = TypeVar("T")

# Pauses before each retry (three retries, about 0.75 s in all): a replacement connection is usually there at once,
# and the claim's lease (at least 2 s, SAGA_LEASE_SECONDS) must not run out while the record waits.
RETRY_PAUSES = (0.05, 0.2, 0.5)
# SQLSTATEs of a session that is gone: class 08 (connection exception) and the server's shutdown kinds (57P01
# admin_shutdown, the one pg_terminate_backend sends; 57P02 crash_shutdown; 57P03 cannot_connect_now).
_GONE_STATES = ("57P01", "57P02", "57P03")


class ConnectionLost(OperationalError):
    """A record gave up: the connection was lost on every try. Still an OperationalError, so a Celery task retries
    as before (and finds the attempt EXECUTING under its lease); it is the same for every attempt of the commit."""


def retry_on_lost_connection(record: Callable[[int], T], *, what: str) -> T:
    """`record(retry)` (retry: 0 the first time, then 1, 2, ...), tried again on a fresh connection while it fails
    because the connection was lost; `what` names the record in the log. After the last retry the error is
    raised as ConnectionLost, as the error was before retries (the Celery task retries, the sweep settles the
    attempt)."""
    for retry, pause in enumerate((*RETRY_PAUSES, None)):
        session = None
        try:
            session = _session()
            return record(retry)
        except (OperationalError, InterfaceError) as error:
            if not lost_connection(error, session):
                raise
            if pause is None:
                message = (
                    f"Could not record {what}: the database connection was lost on each of {retry + 1} tries "
                    f"(last: {_first_line(error)}). The attempt stays EXECUTING under its lease; the recovery sweep "
                    "settles it when the lease ends (re-run with the same key if idempotent, else marked uncertain)."
                )
                logger.error("%s", message)
                raise ConnectionLost(message) from error
            logger.warning(
                "Recording %s lost its database connection (%s); recording it again on a new connection in %.2f s "
                "(retry %d of %d, same fence token)",
                what,
                _first_line(error),
                pause,
                retry + 1,
                len(RETRY_PAUSES),
            )
            _drop_connection()
            time.sleep(pause)
    raise AssertionError("unreachable: the last try returns or raises")


@dataclass
class Tried(Generic[T]):
    """What the last try that got as far as its COMMIT answered, and the after-commit work it registered (nudges).
    If that COMMIT went through and only its answer was lost, this is the record's answer, and that work, dropped
    by Django with the lost answer, is still owed."""

    answers: T | None = None
    after_commit: list[tuple[Callable[[], None], bool]] = field(default_factory=list)

    def keep(self, answers: T) -> None:
        """Called as the try's last step before its COMMIT."""
        self.answers = answers
        # Django's pending on-commit hooks: an internal list, stable since Django 1.9, of (savepoints, hook, robust)
        # since 4.2 (the stubs still say pairs).
        pending: list[tuple[Any, ...]] = list(connection.run_on_commit)
        self.after_commit = [(entry[1], bool(entry[2]) if len(entry) > 2 else False) for entry in pending]

    def forget(self) -> None:
        """The earlier tries are known to have rolled back."""
        self.answers, self.after_commit = None, []

    def committed_already(self, *, what: str) -> T:
        """An earlier try's COMMIT went through: answer what it answered, and send its after-commit work once this
        try (which writes nothing) commits. Nudges decide nothing, so sending one twice would be harmless too."""
        logger.info("%s was already recorded: the COMMIT whose answer was lost had gone through", what)
        assert self.answers is not None, "committed_already without a try that reached its COMMIT"
        for hook, robust in self.after_commit:
            transaction.on_commit(hook, robust=robust)
        return self.answers


def lost_connection(error: BaseException, session: Any) -> bool:
    """Whether `error` means the database session the record ran on (`session`, the driver's connection it started
    with; None if it could not even connect) is gone, so that a fresh one may succeed.

    The session is asked, not Django's connection: by the time the error arrives, Django has closed the broken
    connection and opened a new one to restore autocommit. Never inside an atomic block (a test case's wrapping
    transaction), whose work a new connection cannot replace."""
    if connection.in_atomic_block:
        return False
    state = getattr(error.__cause__, "sqlstate", None) or ""
    if state.startswith("08") or state in _GONE_STATES:
        return True
    return session is None or bool(getattr(session, "closed", False)) or bool(getattr(session, "broken", False))


def _session() -> Any:
    """The driver connection the next statements run on (opened, or taken from the pool, if there is none)."""
    connection.ensure_connection()
    return connection.connection


def _drop_connection() -> None:
    """Let go of the broken connection, so the next statement opens (or takes from the pool) a working one; the
    pool discards a broken connection handed back to it."""
    try:
        connection.close()
    except DatabaseError:
        connection.connection = None  # closing a dead connection may fail too; it is gone either way


def _first_line(error: BaseException) -> str:
    return (str(error).strip().splitlines() or [type(error).__name__])[0]
