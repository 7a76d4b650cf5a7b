"""Where the proxy's journal work runs: a few long-lived threads, each keeping its database connection, and one
more that writes reads' journal lines after their answers (WriteBehind).

Every proxied call costs two short transactions (begun, finished). Run like other ORM units (sagas.protocols.orm),
each would open a fresh database connection, which on PostgreSQL costs more than the transaction itself; these
threads keep theirs between calls and close them when the proxy stops. A connection idle for a while is checked
before its next unit (so one the server dropped is replaced); one used a moment ago is not, since the check is a
round trip of its own on every call.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import queue
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from django.db import connections

T = TypeVar("T")
# Journal units in flight at once: a few, so one slow transaction does not queue every other client's call behind it.
JOURNAL_THREADS = 4
# A connection unused for longer than this is checked (SELECT 1) before it is used again.
CHECK_AFTER_IDLE_SECONDS = 5.0

# A unit, the loop and future its answer goes to, and what to do with an answer nobody awaits any more.
_Work = tuple[Callable[[], Any], asyncio.AbstractEventLoop, "asyncio.Future[Any]", "Callable[[Any], None] | None"]
# A write-behind unit, when it was submitted and whether it is written at once (loop and future None), or a
# drained() marker (unit None).
_Behind = tuple[Callable[[], Any] | None, asyncio.AbstractEventLoop | None, "asyncio.Future[None] | None", float, bool]
logger = logging.getLogger("sagas.protocols.proxy")


class Journal:
    def __init__(self, threads: int = JOURNAL_THREADS) -> None:
        self._work: queue.SimpleQueue[_Work | None] = queue.SimpleQueue()
        self._threads = [
            threading.Thread(target=self._serve, name=f"proxy-journal-{n}", daemon=True) for n in range(threads)
        ]
        self._lock = threading.Lock()
        self._started = self._closed = False

    async def run(self, unit: Callable[[], T], *, abandoned: Callable[[T], None] | None = None) -> T:
        """`unit()` on a journal thread; its answer (or exception) here. The unit runs to its end even when the
        caller is cancelled meanwhile (a transaction is not cut in half); `abandoned(answer)` then gets the answer
        nobody awaits any more, on the event loop, to undo what the caller would have followed it with."""
        self._start()
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        self._work.put((unit, loop, future, abandoned))
        try:
            return await future
        except asyncio.CancelledError:
            # Cancelled after the answer was handed over but before this coroutine resumed: nobody will act on it.
            if abandoned is not None and future.done() and not future.cancelled() and future.exception() is None:
                abandoned(future.result())
            raise

    def close(self) -> None:
        """Let every thread finish what it has, close its connections and stop."""
        with self._lock:
            if not self._started or self._closed:
                return
            self._closed = True
        for _ in self._threads:
            self._work.put(None)
        for thread in self._threads:
            thread.join()

    def _start(self) -> None:
        with self._lock:
            if self._closed:
                raise RuntimeError("the proxy's journal is closed: the proxy is stopping")
            if not self._started:
                self._started = True
                for thread in self._threads:
                    thread.start()

    def _serve(self) -> None:
        last_used = 0.0
        try:
            while (work := self._work.get()) is not None:
                unit, loop, future, abandoned = work
                if time.monotonic() - last_used > CHECK_AFTER_IDLE_SECONDS:
                    _drop_unusable_connections()
                try:
                    result = unit()
                except BaseException as error:  # handed to the awaiting coroutine, which raises it
                    loop.call_soon_threadsafe(_settle, future, None, error)
                    last_used = 0.0  # it may have been the connection: check it before the next unit
                else:
                    loop.call_soon_threadsafe(_settle, future, result, None, abandoned)
                    last_used = time.monotonic()
        finally:
            connections.close_all()


def _write(batch: list[_Behind]) -> bool:
    """Write the batch's units, together when they can be (`write_batch`); when that fails, one by one, so one bad
    line does not take the others with it. False when any failed (it is logged: its call stays answered)."""
    units = [item[0] for item in batch if item[0] is not None]
    write_batch = getattr(units[0], "write_batch", None)
    if len(units) > 1 and write_batch is not None:
        try:
            write_batch(units)
            return True
        except Exception:
            logger.warning("%d lines written together failed; writing them one by one", len(units), exc_info=True)
    written = True
    for unit in units:
        try:
            unit()
        except Exception:
            logger.exception("a line written behind its answer failed (the call was answered)")
            written = False
    return written


def _drop_unusable_connections() -> None:
    for connection in connections.all(initialized_only=True):
        if connection.connection is not None and not connection.is_usable():
            connection.close()  # the server dropped it: the unit's first query opens a new one


def _settle(
    future: asyncio.Future[Any],
    result: Any,
    error: BaseException | None,
    abandoned: Callable[[Any], None] | None = None,
) -> None:
    if future.cancelled():
        if abandoned is not None and error is None:
            abandoned(result)
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(result)


class WriteBehind:
    """The journal lines of reads, written after their answers went out, in the order they were submitted, on one
    thread that keeps its database connection (sagas.protocols.proxy.behind).

    The thread writes while the proxy is quiet (no call in flight for QUIET_SECONDS), so a burst of reads is not
    slowed by its own journal, which shares the interpreter with it; a line waits at most MAX_DELAY_SECONDS (or its
    own `max_delay`), and once
    MAX_BACKLOG lines wait they are written at once. `drained()` waits until everything submitted so far is written:
    a call journaled ahead waits for it before its own line, so a session's ledger keeps the order its calls were
    sent in. `close()` writes what is queued, then stops: nothing is lost on a clean stop. A unit that fails is
    logged (its read stays answered; only its journal line is missing)."""

    QUIET_SECONDS = 0.005
    # After a batch written while calls were being answered, the next waits this long unless the proxy goes quiet:
    # a transaction of lines holds their session, which the session's next call may be waiting for.
    PAUSE_SECONDS = 0.01
    MAX_DELAY_SECONDS = 1.0
    MAX_BACKLOG = 100
    MAX_BATCH = 50  # a session's queued reads written in one transaction (ReadLine.write_batch)

    def __init__(self) -> None:
        self._work: queue.SimpleQueue[_Behind | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._serve, name="proxy-journal-behind", daemon=True)
        self._lock = threading.Lock()
        self._pending = 0  # units submitted and not yet written
        self._urgent = 0  # drained() waiting, or closing: write without waiting for a quiet moment
        self._in_flight = 0  # calls the proxy is answering now (the event loop's count; read here as a hint)
        self._last_active = 0.0
        self._started = self._closed = False

    @contextlib.contextmanager
    def busy(self) -> Iterator[None]:
        """Around a call on the event loop: the journal does not write behind while calls are being answered."""
        self._in_flight += 1
        try:
            yield
        finally:
            self._in_flight -= 1
            self._last_active = time.monotonic()

    def submit(self, unit: Callable[[], Any], *, at_once: bool = False) -> None:
        """Queue `unit`; `at_once`: write it (and what is queued before it) without waiting for a quiet moment (a
        write's outcome, recorded just after its answer went out)."""
        self._start()
        with self._lock:
            self._pending += 1
            self._urgent += at_once
        self._work.put((unit, None, None, time.monotonic(), at_once))

    async def drained(self) -> None:
        """Return once every unit submitted before this call is written (at once when none is pending)."""
        if not self._pending:
            return
        self._start()
        loop = asyncio.get_running_loop()
        future: asyncio.Future[None] = loop.create_future()
        with self._lock:
            self._urgent += 1
        self._work.put((None, loop, future, 0.0, False))
        await future

    def close(self) -> None:
        with self._lock:
            if not self._started or self._closed:
                self._closed = True
                return
            self._closed = True
            self._urgent += 1
        self._work.put(None)
        self._thread.join()

    def _start(self) -> None:
        with self._lock:
            if self._closed:
                raise RuntimeError("the proxy's journal is closed: the proxy is stopping")
            if not self._started:
                self._started = True
                self._thread.start()

    def _serve(self) -> None:
        last_used = not_before = 0.0
        carried: list[_Behind | None] = []  # taken from the queue while gathering a batch, not part of it
        try:
            while True:
                work = carried.pop() if carried else self._work.get()
                if work is None:
                    break
                unit, loop, future, submitted, _ = work
                if unit is None:  # a drained() marker: everything before it is written
                    with self._lock:
                        self._urgent -= 1
                    if loop is not None and future is not None:
                        loop.call_soon_threadsafe(_settle, future, None, None)
                    continue
                waits = getattr(unit, "max_delay", self.MAX_DELAY_SECONDS)
                quiet = self._wait_for_quiet(submitted + waits, not_before)
                batch = self._batch(work, carried)
                if time.monotonic() - last_used > CHECK_AFTER_IDLE_SECONDS:
                    _drop_unusable_connections()
                try:
                    last_used = time.monotonic() if _write(batch) else 0.0
                    # Written while calls were being answered: the next batch lets them have the database first.
                    not_before = 0.0 if quiet else time.monotonic() + self.PAUSE_SECONDS
                finally:
                    with self._lock:
                        self._pending -= len(batch)
                        self._urgent -= sum(item[4] for item in batch)
        finally:
            connections.close_all()

    def _batch(self, first: _Behind, carried: list[_Behind | None]) -> list[_Behind]:
        """`first` and the units queued right after it with the same `batch_key` (a session's reads: one
        transaction for all), up to MAX_BATCH; the item that ended the batch, if one was taken, goes to `carried`
        (it is the next one served)."""
        key = getattr(first[0], "batch_key", None)
        most = getattr(first[0], "max_batch", self.MAX_BATCH)
        batch = [first]
        while key is not None and len(batch) < most:
            try:
                following = self._work.get_nowait()
            except queue.Empty:
                break
            if following is None or following[0] is None or getattr(following[0], "batch_key", None) != key:
                carried.append(following)
                break
            batch.append(following)
        return batch

    def _wait_for_quiet(self, deadline: float, not_before: float) -> bool:
        """Until no call is being answered (True), or the oldest line's deadline passed or the backlog is full, but
        not before `not_before` (False); at once when a caller waits for the lines (drained, close)."""
        while not self._urgent:
            now = time.monotonic()
            if not self._in_flight and now - self._last_active >= self.QUIET_SECONDS:
                return True
            if now >= not_before and (now >= deadline or self._pending >= self.MAX_BACKLOG):
                return False
            time.sleep(self.QUIET_SECONDS / 2)
        return True
