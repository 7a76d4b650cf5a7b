"""Forwarded calls' outcomes waiting a moment to share a commit with their session's next call (group commit).

A call journaled ahead costs two transactions: its begin (written before it is sent) and its finish (its outcome,
written just after the answer went out). An agent that calls again at once would otherwise wait for the finish's
commit before its next call's begin could take the session's lock. So the fast path (sagas.protocols.proxy.
fast_calls) parks each outcome here; the session's next begin takes what is parked for it and records it first, in
its own transaction (`proxy_call_begin`'s `finished`). What no begin takes within FOLD_SECONDS is written on its own
by the write-behind thread, as before, and so is everything parked when something else must come after it: a
read's journal line, any other journal operation, the proxy stopping.

What this changes: an outcome is durable a few milliseconds later than before at most (it was already written after
the answer went out; a crash in between leaves its step EXECUTING, and the recovery sweep calls it uncertain, as
it did). What it does not change: every begin is committed before its call is sent.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Callable
from typing import Any

from governance.identity.principal import Principal
from sagas.operations.invoke import invoke
from sagas.operations.table import OPERATIONS
from sagas.protocols.proxy.journal import WriteBehind
from sagas.proxied_facts import FinishedCall

logger = logging.getLogger("sagas.protocols.proxy")
# How long an outcome waits for its session's next call before it is written on its own: longer than an agent's
# turnaround between calls sent back to back, far shorter than a recovery sweep's lease.
FOLD_SECONDS = 0.01
_Key = tuple[Principal, str]  # whose call, in which session (its saga)


class PendingFinishes:
    def __init__(self, behind: WriteBehind) -> None:
        self._behind = behind
        self._parked: dict[_Key, list[FinishedCall]] = {}
        self._timers: dict[_Key, asyncio.TimerHandle] = {}

    def park(self, principal: Principal, saga_id: str, done: FinishedCall) -> None:
        """Keep `done` for the session's next begin (on the event loop); written on its own after FOLD_SECONDS."""
        key = (principal, saga_id)
        self._parked.setdefault(key, []).append(done)
        if key not in self._timers:
            loop = asyncio.get_running_loop()
            self._timers[key] = loop.call_later(FOLD_SECONDS, self.flush, principal, saga_id)

    def take(self, principal: Principal, saga_id: str) -> list[FinishedCall]:
        """What is parked for the session's calls by `principal`, for its next begin to record (now off the shelf)."""
        key = (principal, saga_id)
        timer = self._timers.pop(key, None)
        if timer is not None:
            timer.cancel()
        return self._parked.pop(key, [])

    def flush(self, principal: Principal, saga_id: str) -> None:
        """Hand what is parked for the session to the write-behind thread, to be written now."""
        for done in self.take(principal, saga_id):
            self._behind.submit(functools.partial(write_finished, principal, saga_id, done), at_once=True)

    def flush_all(self) -> None:
        for principal, saga_id in list(self._parked):
            self.flush(principal, saga_id)


def write_finished(principal: Principal, saga_id: str, done: FinishedCall) -> None:
    """`proxy_call_finish` of one parked outcome (on a journal thread)."""
    arguments = {"saga_id": saga_id, "step_id": done.step_id, "fence": done.fence, "outcome": done.outcome}
    invoke(OPERATIONS["proxy_call_finish"], principal, arguments)


def begin_folding(principal: Principal, arguments: dict[str, Any], finished: list[FinishedCall]) -> Any:
    """`proxy_call_begin` recording `finished` first in its transaction (on a journal thread). When it fails, none
    of them was written: each is then written on its own, and the begin is tried once more without them, so a fault
    of an earlier call's outcome never refuses this call (and an error of this call's own is raised as it was)."""
    begin: Callable[..., Any] = functools.partial(invoke, OPERATIONS["proxy_call_begin"], principal)
    if not finished:
        return begin(arguments)
    try:
        return begin({**arguments, "finished": finished})
    except Exception:
        for done in finished:
            try:
                write_finished(principal, str(arguments["saga_id"]), done)
            except Exception:
                logger.exception("a forwarded call's outcome could not be recorded (its call was answered)")
    return begin(arguments)
