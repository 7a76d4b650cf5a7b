"""The proxy's journal threads (sagas.protocols.proxy.journal.Journal): a unit runs to its end even when its caller is
cancelled, and an answer nobody awaits any more reaches `abandoned`, whichever moment the cancel came at: before the
answer was handed over, or after it was and before the caller resumed (the moment a cancelled fast-path call once
left its journaled intent behind, never sent and never recorded)."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from sagas.protocols.proxy import journal as journal_module
from sagas.protocols.proxy.journal import Journal


def _run(scenario: Any) -> Any:
    return asyncio.run(scenario())


def test_an_answer_handed_over_as_its_caller_is_cancelled_reaches_abandoned(monkeypatch: pytest.MonkeyPatch):
    abandoned: list[str] = []
    settle = journal_module._settle
    caller: dict[str, asyncio.Task[Any]] = {}

    def settle_then_cancel(future: Any, result: Any, error: Any, nobody: Any = None) -> None:
        settle(future, result, error, nobody)  # the answer is handed over...
        caller["task"].cancel()  # ...and the caller is cancelled before it resumes

    monkeypatch.setattr(journal_module, "_settle", settle_then_cancel)

    async def scenario() -> None:
        journal = Journal(threads=1)
        caller["task"] = asyncio.current_task()  # type: ignore[assignment]
        try:
            with pytest.raises(asyncio.CancelledError):
                await journal.run(lambda: "intended", abandoned=abandoned.append)
        finally:
            journal.close()

    _run(scenario)
    assert abandoned == ["intended"]


def test_a_caller_cancelled_while_its_unit_runs_leaves_the_answer_to_abandoned():
    abandoned: list[str] = []
    started, release = threading.Event(), threading.Event()

    def unit() -> str:
        started.set()
        release.wait(5)
        return "begun"

    async def scenario() -> None:
        journal = Journal(threads=1)
        task = asyncio.ensure_future(journal.run(unit, abandoned=abandoned.append))
        await asyncio.to_thread(started.wait, 5)
        task.cancel()
        release.set()
        with pytest.raises(asyncio.CancelledError):
            await task
        await asyncio.to_thread(journal.close)
        await asyncio.sleep(0)  # the thread's hand-over runs on this loop

    _run(scenario)
    assert abandoned == ["begun"]
