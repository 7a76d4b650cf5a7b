"""Group commit of node outcomes (sagas.coordinator.execution.group_commit): attempts of one saga finishing while
another
of its outcomes is being recorded share the next transaction, and one attempt that cannot be recorded does not
take the others down with it."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest
from django.db import connections, transaction

from audit.chain import verify_chain
from governance.identity.principal import Principal
from sagas import coordinator
from sagas.coordinator.execution import attempts as _attempts
from sagas.coordinator.execution import group_commit as _record_groups
from sagas.coordinator.execution import node_attempts, nudges
from sagas.coordinator.execution.attempts import Claim
from sagas.executor import Outcome
from sagas.models import Node, Saga
from sagas.states import NodeStatus
from tests.contracts import register
from tests.sagas.helpers import wait_until
from tests.sagas.test_hot_path_queries import NOOP

WIDTH = 4


@pytest.fixture
def claims(operator: Principal, monkeypatch: pytest.MonkeyPatch) -> list[Claim]:
    """WIDTH independent nodes of one saga, each claimed (EXECUTING under its lease) by this test."""
    sent: list[tuple[Any, Any]] = []
    monkeypatch.setattr(nudges, "nudge_node", lambda saga_id, node_id, delay=0.0: sent.append((saga_id, node_id)))
    register(NOOP)
    saga = coordinator.saga_begin(actor=operator)
    for i in range(WIDTH):
        coordinator.node_plan(actor=operator, saga_id=saga.id, action="noop", input={}, key=f"n{i}")
    coordinator.saga_run_ready(actor=operator, saga_id=saga.id, max_parallel=WIDTH, wait_seconds=0)
    found = [node_attempts._claim_nudged(saga_id, node_id) for saga_id, node_id in sent]
    assert all(found) and len(found) == WIDTH
    return [claim for claim in found if claim is not None]


@pytest.fixture
def batches(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The size of every shared transaction (the real one runs; its size is noted on the way)."""
    sizes: list[int] = []
    real = _attempts.record_outcomes

    def noting(attempts: list[Any]) -> list[Any]:
        sizes.append(len(attempts))
        return real(attempts)

    monkeypatch.setattr(_record_groups, "record_outcomes", noting)
    return sizes


@pytest.fixture
def saga_held(claims: list[Claim]) -> Iterator[threading.Event]:
    """Another transaction holds the saga row until the test sets the yielded event, so the first recorder waits."""
    locked, release = threading.Event(), threading.Event()

    def hold() -> None:
        with transaction.atomic(durable=True):
            Saga.objects.select_for_update(no_key=True).filter(pk=claims[0].saga_id).update(metadata={"held": 1})
            locked.set()
            release.wait(timeout=30)
        connections.close_all()

    holder = threading.Thread(target=hold)
    holder.start()
    assert locked.wait(timeout=10)
    yield release
    release.set()
    holder.join(timeout=30)


def _record_all(claims: list[Claim], outcomes: list[Outcome], release: threading.Event) -> list[Any]:
    """The first claim starts recording (and waits for the saga row); the others arrive meanwhile."""
    answers: list[Any] = [None] * len(claims)

    def record(i: int) -> None:
        try:
            answers[i] = _record_groups.record_grouped(claims[i], outcomes[i], None, lambda: None)
        except BaseException as error:
            answers[i] = error
        finally:
            connections.close_all()

    saga_id = claims[0].saga_id
    threads = [threading.Thread(target=record, args=(i,)) for i in range(len(claims))]
    threads[0].start()
    wait_until(lambda: _gathered(saga_id) == 0, what="the first recorder to take its turn")
    for thread in threads[1:]:
        thread.start()
    wait_until(lambda: _gathered(saga_id) == len(claims) - 1, what="the others to gather")
    release.set()
    for thread in threads:
        thread.join(timeout=30)
    return answers


def _gathered(saga_id: Any) -> int:
    saga = _record_groups._sagas.get(saga_id)
    return -1 if saga is None or not saga.recording else len(saga.waiting)


def test_outcomes_finishing_together_share_one_commit(
    claims: list[Claim], batches: list[int], saga_held: threading.Event
) -> None:
    answers = _record_all(claims, [Outcome(ok=True, result={"n": i}) for i in range(WIDTH)], saga_held)
    assert [verdict for verdict, _ in answers] == ["completed"] * WIDTH
    assert batches == [WIDTH - 1]  # the first alone (it found nobody recording), then everyone who gathered
    saga_id = claims[0].saga_id
    assert set(Node.objects.filter(saga_id=saga_id).values_list("status", flat=True)) == {NodeStatus.COMPLETED}
    assert verify_chain(saga_id).valid


def test_an_attempt_that_cannot_be_recorded_fails_alone(
    claims: list[Claim], batches: list[int], saga_held: threading.Event
) -> None:
    outcomes = [Outcome(ok=True, result={"n": i}) for i in range(WIDTH)]
    outcomes[2] = Outcome(ok=True, result=object())  # cannot be stored as JSON: its transaction fails
    answers = _record_all(claims, outcomes, saga_held)
    assert isinstance(answers[2], TypeError)  # raised in its own thread only
    assert [answers[i][0] for i in (0, 1, 3)] == ["completed"] * 3
    assert batches == [WIDTH - 1]  # tried together, then recorded one by one
    statuses = {n.key: n.status for n in Node.objects.filter(saga_id=claims[0].saga_id)}
    assert sorted(statuses.values()) == sorted([NodeStatus.COMPLETED] * 3 + [NodeStatus.EXECUTING])
    assert verify_chain(claims[0].saga_id).valid


class _Stopped(BaseException):
    """Stands for what ends a thread outright (KeyboardInterrupt, SystemExit)."""


def test_a_recorder_that_stops_leaves_nobody_waiting(
    claims: list[Claim], saga_held: threading.Event, monkeypatch: pytest.MonkeyPatch
) -> None:
    def stopped(attempts: list[Any]) -> list[Any]:
        raise _Stopped()

    monkeypatch.setattr(_record_groups, "record_outcomes", stopped)
    answers = _record_all(claims, [Outcome(ok=True, result={}) for _ in range(WIDTH)], saga_held)
    assert answers[0][0] == "completed"  # recorded alone, before the others gathered
    stops = [a for a in answers[1:] if isinstance(a, _Stopped)]
    told = [a for a in answers[1:] if isinstance(a, RuntimeError)]
    assert len(stops) == 1 and len(told) == WIDTH - 2  # the one leading stopped; the others were told, not left
    assert "recovery sweep" in str(told[0])
    assert claims[0].saga_id not in _record_groups._sagas  # the saga's next outcome is recorded as usual
