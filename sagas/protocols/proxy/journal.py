"""Where the proxy's journal work runs: a few long-lived threads, each keeping its database connection.

Every proxied call costs two short transactions (begun, finished). Run like other ORM units (sagas.protocols.orm),
each would open a fresh database connection, which on PostgreSQL costs more than the transaction itself; these
threads keep theirs between calls and close them when the proxy stops. A connection idle for a while is checked
before its next unit (so one the server dropped is replaced); one used a moment ago is not, since the check is a
round trip of its own on every call.
"""

from __future__ import annotations

import asyncio
import queue
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

from django.db import connections

T = TypeVar("T")
# Journal units in flight at once: a few, so one slow transaction does not queue every other client's call behind it.
JOURNAL_THREADS = 4
# A connection unused for longer than this is checked (SELECT 1) before it is used again.
CHECK_AFTER_IDLE_SECONDS = 5.0

_Work = tuple[Callable[[], Any], asyncio.AbstractEventLoop, "asyncio.Future[Any]"]


class Journal:
    def __init__(self, threads: int = JOURNAL_THREADS) -> None:
        self._work: queue.SimpleQueue[_Work | None] = queue.SimpleQueue()
        self._threads = [
            threading.Thread(target=self._serve, name=f"proxy-journal-{n}", daemon=True) for n in range(threads)
        ]
        self._lock = threading.Lock()
        self._started = self._closed = False

    async def run(self, unit: Callable[[], T]) -> T:
        """`unit()` on a journal thread; its answer (or exception) here."""
        self._start()
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        self._work.put((unit, loop, future))
        return await future

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
                unit, loop, future = work
                if time.monotonic() - last_used > CHECK_AFTER_IDLE_SECONDS:
                    _drop_unusable_connections()
                try:
                    result = unit()
                except BaseException as error:  # handed to the awaiting coroutine, which raises it
                    loop.call_soon_threadsafe(_settle, future, None, error)
                    last_used = 0.0  # it may have been the connection: check it before the next unit
                else:
                    loop.call_soon_threadsafe(_settle, future, result, None)
                    last_used = time.monotonic()
        finally:
            connections.close_all()


def _drop_unusable_connections() -> None:
    for connection in connections.all(initialized_only=True):
        if connection.connection is not None and not connection.is_usable():
            connection.close()  # the server dropped it: the unit's first query opens a new one


def _settle(future: asyncio.Future[Any], result: Any, error: BaseException | None) -> None:
    if future.cancelled():
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(result)
