"""The proxy's journal as the call path uses it: every operation of the table it invokes, on the journal's threads,
with what keeps a session's ledger in order and loses nothing when the proxy stops.

- A call's begin waits for the reads' lines queued before it (WriteBehind.drained) and carries the outcomes parked
  for its session (PendingFinishes, one commit for both); any other operation is run after those outcomes are handed
  to the write-behind thread.
- A begin whose caller went away meanwhile (Journal.run's `abandoned`) sent nothing: its forwarded step is finished
  not sent and a call held on its request is withdrawn, by the write-behind thread.
- `aclose` lets the begins still queued commit, then writes everything parked or queued behind them.
"""

from __future__ import annotations

import asyncio
import functools
import uuid
from typing import Any

import anyio

from governance.identity.principal import Principal
from sagas.operations.invoke import invoke
from sagas.operations.table import OPERATIONS
from sagas.protocols.proxy.behind import (
    CallLine,
    QuickReadCheck,
    finished_call,
    may_read_now,
    now,
    sqlite_turn,
    write_withdraw,
)
from sagas.protocols.proxy.forwarding import GONE_BEFORE_SENT
from sagas.protocols.proxy.journal import Journal, WriteBehind
from sagas.protocols.proxy.pending_finishes import PendingFinishes, begin_folding, write_finished
from sagas.proxied_facts import CallFacts


class ProxyJournal:
    def __init__(self, max_result_bytes: int) -> None:
        self.max_result_bytes = max_result_bytes
        self.journal = Journal()
        self.behind = WriteBehind()  # reads' journal lines, written after their answers
        self.finishes = PendingFinishes(self.behind)  # the fast path's outcomes, folded into the next begin
        self.quick = QuickReadCheck()  # whether a read may go now, asked on the event loop

    async def op(self, name: str, principal: Principal, **arguments: Any) -> dict[str, Any]:
        """The operation `name`'s answer, invoked on a journal thread (the module docstring's order)."""
        if name != "proxy_call_begin":
            self.finishes.flush_all()  # outcomes parked for a next begin are written before anything after them
            return await self.journal.run(functools.partial(invoke, OPERATIONS[name], principal, arguments))
        await self.behind.drained()  # after the reads before it: a session's ledger keeps the order of its calls
        finished = self.finishes.take(principal, str(arguments["saga_id"]))
        unit = functools.partial(begin_folding, principal, arguments, finished)
        return await self.journal.run(unit, abandoned=functools.partial(self._begun_for_nobody, principal, arguments))

    async def intend(
        self, principal: Principal, saga_id: str, call: CallFacts, arguments: dict[str, Any], step_id: uuid.UUID
    ) -> bool:
        """`proxy_call_intend` on a journal thread: whether the call's intent is journaled, so it may be sent."""
        intent = {"saga_id": saga_id, "call": call, "arguments": arguments, "step_id": step_id}
        unit = functools.partial(_intend, principal, intent)
        nobody = functools.partial(self._intended_for_nobody, principal, saga_id, step_id)
        answer = await self.journal.run(unit, abandoned=nobody)
        return bool(answer["intended"])

    def _intended_for_nobody(
        self, principal: Principal, saga_id: str, step_id: uuid.UUID, answer: dict[str, Any]
    ) -> None:
        """An intent journaled after its client went away: nothing was sent, which its step says."""
        if answer.get("intended"):
            outcome = {"kind": "not_sent", "reason": GONE_BEFORE_SENT, "max_result_bytes": self.max_result_bytes}
            done = finished_call({"step_id": str(step_id), "fence": 1}, outcome, now(), now())
            self.behind.submit(CallLine(principal, saga_id, done), at_once=True)

    async def read_cleared(self, tenant_id: str, saga_id: str) -> bool:
        """`may_read_now`: by one statement on the quick check's own connection, else on a journal thread (then
        the quick connection is opened, or opened again after a failure, for the next reads)."""
        cleared = self.quick(tenant_id, saga_id)
        if cleared is None:
            cleared = await self.journal.run(functools.partial(may_read_now, tenant_id, saga_id))
            if self.quick.due():
                await self.journal.run(self.quick.open)
        return cleared

    def _begun_for_nobody(self, principal: Principal, begin: dict[str, Any], begun: dict[str, Any]) -> None:
        """A call's begin committed after its client went away (the caller was cancelled meanwhile): nothing was
        sent, so a forwarded step is finished not sent and a call held on its request is withdrawn, rather than
        left EXECUTING or held, under a lease this process keeps alive, until the sweep calls it uncertain."""
        if begun.get("outcome") == "forward":
            outcome = {"kind": "not_sent", "reason": GONE_BEFORE_SENT, "max_result_bytes": self.max_result_bytes}
            done = finished_call(begun, outcome, now(), now())
            self.behind.submit(functools.partial(write_finished, principal, begun["saga_id"], done), at_once=True)
        elif begun.get("outcome") == "held" and begin["call"].held_as == "request":
            unit = functools.partial(write_withdraw, principal, begun, begin["call"], begin["arguments"])
            self.behind.submit(unit, at_once=True)

    async def aclose(self) -> None:
        """Stop journaling, losing nothing: the begins still queued commit first (a begin whose caller went away
        meanwhile hands the write-behind thread its 'not sent' outcome, on this loop), then everything parked or
        queued behind is written."""
        await anyio.to_thread.run_sync(self.journal.close)
        await asyncio.sleep(0)  # the last begins' answers, handed to this loop by their threads, are taken now
        self.finishes.flush_all()
        await anyio.to_thread.run_sync(self.behind.close)
        self.quick.close()


def _intend(principal: Principal, intent: dict[str, Any]) -> dict[str, Any]:
    with sqlite_turn():
        return invoke(OPERATIONS["proxy_call_intend"], principal, intent)
