"""Reads journaled behind their answers: the fast path of a tools/call of class `read` with gate `allow`.

A read changes nothing, so its journal line need not be written before it is sent (write-ahead intent is for side
effects). Such a call is still decided before it is sent, on what decides a read in `proxy_call_begin` (docs/proxy.md,
"How a call is journaled"): the session must be active and no kill switch engaged for its tenant or saga, read in one
short query (`may_read_now`) without a write. Then it is forwarded, answered, and its step (`proxy_call_begin` then
`proxy_call_finish`, the same two operations and audit events as a write-ahead read) is written by the journal's
write-behind thread (sagas.protocols.proxy.journal.WriteBehind).

Every other call takes the write-ahead path, unchanged: a non-read or unknown class, any gate but `allow`, a tool
whose pack declares a capture read, and every call while tenant policy is active (its decision is audited in the
same transaction as the step, and may hold or refuse a read). So does a read the quick check does not clear (a
session not active, a switch engaged): the write-ahead path then journals the refusal exactly as before.

What this changes, and only for such reads: the step is written just after the answer went out, not before it was
sent; a crash (not a clean stop) can lose the journal lines of reads answered in the moment before it (the step id
a read carries as its idempotency key is chosen before it is sent, and its step is written under that id); and a
kill switch engaged
between the quick check and the write is recorded on the step (the write-behind `proxy_call_begin` refuses it) though
the read had been sent before the switch, which the log says.
"""

from __future__ import annotations

import contextlib
import logging
import sqlite3
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from django.db import DEFAULT_DB_ALIAS, connections
from django.db.models import Q

from governance.identity.principal import Principal
from governance.models import KillSwitch
from governance.policy import engine as governance_policy
from sagas.models import Saga
from sagas.operations.invoke import invoke
from sagas.operations.table import OPERATIONS
from sagas.proxied_facts import BehindRead, CallFacts, CallOutcome, FinishedCall
from sagas.states import SagaStatus

logger = logging.getLogger("sagas.protocols.proxy")


def may_read_now(tenant_id: str, saga_id: str) -> bool:
    """Whether a read in this session would be forwarded by `proxy_call_begin` as policy stands now: no tenant policy
    to evaluate (it is audited with the step, so with one the read is journaled ahead), the session active, no kill
    switch engaged for its tenant or for it. False sends the call down the write-ahead path, which decides again
    and journals why. Runs on a journal thread."""
    if governance_policy.engine() is not None:
        return False
    if not Saga.objects.filter(pk=saga_id, tenant_id=tenant_id, status=SagaStatus.ACTIVE).exists():
        return False
    switched = KillSwitch.objects.filter(tenant_id=tenant_id).filter(Q(saga_id__isnull=True) | Q(saga_id=saga_id))
    return not switched.exists()


# A quick read check whose connection failed connects again after this long (meanwhile the journal threads check).
REOPEN_AFTER_SECONDS = 5.0


class QuickReadCheck:
    """`may_read_now` as one statement on a database connection of its own, asked on the event loop: the fast path
    (sagas.protocols.proxy.fast_calls) spares a read the hop to a journal thread and two ORM queries. Read-only (it
    writes nothing, so the coordinator stays the only writer); autocommit, so it sees what is committed now. None
    when it cannot ask (no connection, an error: the connection is dropped), and the caller asks `may_read_now` on
    a journal thread instead."""

    def __init__(self) -> None:
        self._vendor = connections[DEFAULT_DB_ALIAS].vendor
        self._connection: Any = None
        self._tried_at: float | None = None  # when it last tried to connect
        mark = "?" if self._vendor == "sqlite" else "%s"
        saga, switch = Saga._meta.db_table, KillSwitch._meta.db_table
        self._sql = (
            f"SELECT EXISTS(SELECT 1 FROM {saga} WHERE id = {mark} AND tenant_id = {mark} AND status = {mark})"
            f" AND NOT EXISTS(SELECT 1 FROM {switch} WHERE tenant_id = {mark}"
            f" AND (saga_id IS NULL OR saga_id = {mark}))"
        )

    def due(self) -> bool:
        """Whether to (re)connect now: never tried, or not connected and the last try was a while ago."""
        return self._connection is None and (
            self._tried_at is None or time.monotonic() - self._tried_at > REOPEN_AFTER_SECONDS
        )

    def open(self) -> None:
        """Connect (on a journal thread: Django's connection parameters are read there)."""
        self._tried_at = time.monotonic()
        params = connections[DEFAULT_DB_ALIAS].get_connection_params()
        if self._vendor == "sqlite":
            self._connection = sqlite3.connect(
                params["database"],
                timeout=params.get("timeout", 30),
                uri=True,
                check_same_thread=False,
                isolation_level=None,
            )
        elif self._vendor == "postgresql":
            import psycopg

            self._connection = psycopg.connect(**params, autocommit=True)

    def __call__(self, tenant_id: str, saga_id: str) -> bool | None:
        if self._connection is None or governance_policy.engine() is not None:
            return None if self._connection is None else False
        key: Any = uuid.UUID(saga_id).hex if self._vendor == "sqlite" else uuid.UUID(saga_id)
        try:
            row = self._connection.execute(self._sql, [key, tenant_id, SagaStatus.ACTIVE.value, tenant_id, key])
            return bool(row.fetchone()[0])
        except Exception:  # the server dropped it, or a lock: ask on a journal thread, and reconnect no more
            logger.warning(
                "the proxy's quick read check failed; reads are checked on the journal threads", exc_info=True
            )
            self.close()
            return None

    def close(self) -> None:
        connection, self._connection = self._connection, None
        if connection is not None:
            with contextlib.suppress(Exception):
                connection.close()


@dataclass(frozen=True)
class ReadLine:
    """Everything a read's step needs, gathered on the event loop when the answer came."""

    principal: Principal
    saga_id: str
    step_id: str  # chosen before the read was sent, which carried it as its idempotency key
    call: CallFacts
    arguments: dict[str, Any]
    outcome: dict[str, Any]  # CallOutcome's fields but duration_ms
    started: float
    finished: float

    @property
    def batch_key(self) -> tuple[str, str, str, str]:
        """Lines of one session (and principal) are written together (sagas.protocols.proxy.journal.WriteBehind)."""
        return ("reads", self.principal.tenant_id, self.principal.principal_id, self.saga_id)

    def __call__(self) -> None:
        self.write_batch([self])

    @staticmethod
    def write_batch(lines: list[ReadLine]) -> None:
        """The reads' steps, begun and finished as a write-ahead read records them, in one transaction
        (`proxy_reads_record`; on the write-behind thread). All lines share a batch_key."""
        first = lines[0]
        reads = [line.behind_read() for line in lines]
        with sqlite_turn():
            answer = invoke(
                OPERATIONS["proxy_reads_record"], first.principal, {"saga_id": first.saga_id, "reads": reads}
            )
        for line, begun in zip(lines, answer["begun"], strict=True):
            if begun["outcome"] != "forward":
                logger.warning(
                    "read %s on %s was sent and answered after its session's check, but its journal line was refused "
                    "(%s): the step says %s",
                    line.call.tool,
                    line.call.server,
                    begun.get("code") or begun.get("reason"),
                    begun["outcome"],
                )

    def behind_read(self) -> BehindRead:
        duration_ms = round((self.finished - self.started) * 1000, 3)
        outcome = CallOutcome.model_validate({**self.outcome, "duration_ms": duration_ms})
        return BehindRead(call=self.call, arguments=self.arguments, step_id=self.step_id, outcome=outcome)


@dataclass(frozen=True)
class CallLine:
    """The outcome of a call sent on an intent (sagas.protocols.proxy.intended), to record behind its answer: its
    step is written with it (`proxy_calls_record`), several of a session's in one transaction."""

    principal: Principal
    saga_id: str
    done: FinishedCall
    # A transaction holds the session (on SQLite the session's next intent waits for it), so not all at once; but
    # enough that back-to-back calls do not outrun the thread, which pauses 10 ms between batches while calls go on
    # (WriteBehind.PAUSE_SECONDS): 16 a batch keeps up with 1,600 calls a second, 4 only with 400 (a stdio agent
    # calling back to back makes 700), and a backlog would stretch the 0.1 s in which an outcome is written.
    max_batch = 16
    # Written soon even while calls keep coming: until then a crash turns the call's known outcome into an unknown.
    max_delay = 0.1

    @property
    def batch_key(self) -> tuple[str, str, str, str]:
        return ("calls", self.principal.tenant_id, self.principal.principal_id, self.saga_id)

    def __call__(self) -> None:
        self.write_batch([self])

    @staticmethod
    def write_batch(lines: list[CallLine]) -> None:
        first = lines[0]
        calls = [line.done for line in lines]
        with sqlite_turn():
            invoke(OPERATIONS["proxy_calls_record"], first.principal, {"saga_id": first.saga_id, "calls": calls})


# SQLite has one writer at a time, and a writer that finds the database locked sleeps in steps of 1, 2, 5, 10 ms
# before it tries again. A call's intent (sagas.protocols.proxy.intended) that meets the write-behind thread's
# transaction would sleep past it; waiting on this lock instead, it goes as soon as the transaction ends.
_SQLITE_WRITER = threading.Lock()


@contextlib.contextmanager
def sqlite_turn() -> Iterator[None]:
    """Around a journal write of this process that a call may wait for: on SQLite, one at a time."""
    if connections[DEFAULT_DB_ALIAS].vendor != "sqlite":
        yield
        return
    with _SQLITE_WRITER:
        yield


def finished_call(begun: dict[str, Any], outcome: dict[str, Any], started: float, finished: float) -> FinishedCall:
    """A call begun ahead (`begun`) and what came of it, to record as Forwarder.record records it: a forwarded
    call's outcome just after its answer, or a call begun for a client that went away before it was sent."""
    duration_ms = round((finished - started) * 1000, 3)
    recorded = CallOutcome.model_validate({**outcome, "duration_ms": duration_ms})
    return FinishedCall(step_id=str(begun["step_id"]), fence=int(begun["fence"]), outcome=recorded)


def write_withdraw(principal: Principal, begun: dict[str, Any], call: CallFacts, arguments: dict[str, Any]) -> None:
    """`proxy_call_withdraw` of a call held for a client that went away before it waited (written behind)."""
    held = {"saga_id": begun["saga_id"], "node_id": begun["node_id"]}
    invoke(
        OPERATIONS["proxy_call_withdraw"],
        principal,
        {**held, "why": "disconnected", "call": call, "arguments": arguments},
    )


def now() -> float:
    return time.monotonic()
