"""A record cut off by a terminated connection is recorded again, not dropped (docs/reliability.md, "What the runs
found"). The chaos suite's `pg_terminate_backend` killed a worker's session while it recorded the outcome of a call
that had succeeded: the answer was thrown away and the node waited for the sweep (a second delivery if idempotent,
RECOVERY_REQUIRED if not). Now the record is tried again on a new connection under the same fence; and when the
COMMIT had gone through and only its answer was lost, the retry finds the outcome recorded and writes nothing.

The faults are real: a second session runs `pg_terminate_backend` on the recording session's backend, at a
deterministic point (just before the record's first statement, or just after its COMMIT reached the server)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import pytest
from django.db import OperationalError, connection, connections

from audit.chain import verify_chain
from audit.models import AuditEvent
from governance.identity.principal import Principal
from sagas import coordinator
from sagas.coordinator.execution import attempts, node_attempts, nudges, record_retry
from sagas.coordinator.execution.attempts import Claim, Recording
from sagas.executor import Outcome
from sagas.models import Node, Saga, Step
from sagas.states import NodeStatus, SagaStatus, StepStatus
from tests.contracts import http_contract, register
from tests.httpserver import RecordingHTTPServer
from tests.sagas.helpers import wait_until
from tests.sagas.test_hot_path_queries import NOOP

pipelined = pytest.mark.parametrize("pipeline", [True, False], ids=["pipelined", "one-by-one"])


@pytest.fixture
def on_postgresql(settings: Any, request: pytest.FixtureRequest) -> None:
    if connection.vendor != "postgresql":
        pytest.skip("pg_terminate_backend needs PostgreSQL: runs in the PostgreSQL pass")
    callspec = getattr(request.node, "callspec", None)
    settings.SAGA_PG_PIPELINE = callspec.params.get("pipeline", True) if callspec else True


@dataclass
class Cuts:
    """The records the fault hit (`left`: how many more it may hit) and what a second session saw meanwhile."""

    left: int
    made: int = 0
    committed_before_the_cut: bool = False

    def take(self) -> bool:
        if self.left <= 0:
            return False
        self.left -= 1
        self.made += 1
        return True


def _terminate_own_session() -> int:
    """pg_terminate_backend on this thread's session, from a second session, and wait until the backend is gone."""
    connection.ensure_connection()
    pid = int(connection.connection.info.backend_pid)
    other = connections.create_connection("default")
    try:
        with other.cursor() as cursor:
            cursor.execute("SELECT pg_terminate_backend(%s)", [pid])
            assert cursor.fetchone() == (True,), f"backend {pid} was not terminated"

            def gone() -> bool:
                cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE pid = %s", [pid])
                return cursor.fetchone() == (0,)

            wait_until(gone, what=f"backend {pid} to exit")
    finally:
        other.close()
    return pid


def _completed_steps_seen_elsewhere(saga_id: object) -> int:
    """COMPLETED steps of the saga as a second session sees them (committed ones only)."""
    other = connections.create_connection("default")
    try:
        with other.cursor() as cursor:
            cursor.execute(
                f"SELECT count(*) FROM {Step._meta.db_table} WHERE saga_id = %s AND status = %s",
                [saga_id, StepStatus.COMPLETED],
            )
            return int(cursor.fetchone()[0])
    finally:
        other.close()


def _around_records(monkeypatch: pytest.MonkeyPatch, wrapper: Callable[..., Any]) -> None:
    """Every record transaction (and nothing else: the claims open theirs elsewhere) goes through `wrapper`."""
    monkeypatch.setattr(attempts, "locked_saga", wrapper)


@pytest.fixture
def cut_before_record(monkeypatch: pytest.MonkeyPatch) -> Cuts:
    """The recording session is terminated just before the record's first statement (the saga lock)."""
    cuts = Cuts(left=1)
    real = attempts.locked_saga

    @contextmanager
    def cut(*args: Any, **kwargs: Any) -> Iterator[Any]:
        if cuts.take():
            _terminate_own_session()
        with real(*args, **kwargs) as tx:
            yield tx

    _around_records(monkeypatch, cut)
    return cuts


@pytest.fixture
def cut_before_commit(monkeypatch: pytest.MonkeyPatch) -> Cuts:
    """The recording session is terminated once the record's work is done (follow-ups included), before COMMIT."""
    cuts = Cuts(left=1)
    real = attempts.locked_saga

    @contextmanager
    def cut(*args: Any, **kwargs: Any) -> Iterator[Any]:
        with real(*args, **kwargs) as tx:
            yield tx
            if cuts.take():
                _terminate_own_session()

    _around_records(monkeypatch, cut)
    return cuts


@pytest.fixture
def answer_lost_after_commit(monkeypatch: pytest.MonkeyPatch) -> Cuts:
    """The record's COMMIT reaches the server, then the session is terminated before the worker hears back: the
    worker gets the error a dead session gives, while the outcome is committed."""
    cuts = Cuts(left=1)
    real = attempts.locked_saga

    @contextmanager
    def losing_the_answer(saga_id: object, *args: Any, **kwargs: Any) -> Iterator[Any]:
        with real(saga_id, *args, **kwargs) as tx:
            yield tx
            if cuts.take():
                _arm_lost_answer(cuts, saga_id)  # the block is done: what remains is its COMMIT

    _around_records(monkeypatch, losing_the_answer)
    return cuts


def _arm_lost_answer(cuts: Cuts, saga_id: object) -> None:
    """Make this transaction's COMMIT (Django's, at the end of the durable block) end as a dead session does."""
    wrapper = connection

    def commit_then_lose_the_answer() -> None:
        del wrapper._commit  # type: ignore[attr-defined]  # back to the real one
        wrapper._commit()  # pipelined: COMMIT already went with the last writes; one-by-one: it commits here
        _terminate_own_session()
        cuts.committed_before_the_cut = _completed_steps_seen_elsewhere(saga_id) > 0
        with wrapper.wrap_database_errors:
            wrapper.connection.execute("SELECT 1")  # the genuine error of a terminated session
        raise AssertionError("the session survived pg_terminate_backend")

    wrapper._commit = commit_then_lose_the_answer  # type: ignore[method-assign]


@pytest.fixture
def linear(operator: Principal, downstream: RecordingHTTPServer) -> Saga:
    """a -> b, neither idempotent, one attempt each, pause on failure: an answer the record loses costs an operator."""
    for action in ("once_a", "once_b"):
        register(http_contract(action, downstream.url, idempotent=False, max_attempts=1, failure_mode="pause"))
    saga = coordinator.saga_begin(actor=operator)
    coordinator.node_plan(actor=operator, saga_id=saga.id, action="once_a", input={}, key="a")
    coordinator.node_plan(actor=operator, saga_id=saga.id, action="once_b", input={}, key="b", depends_on=["a"])
    return saga


def _run_to_completion(operator: Principal, saga: Saga) -> None:
    coordinator.saga_run_ready(actor=operator, saga_id=saga.id, wait_seconds=0)
    statuses = Node.objects.filter(saga_id=saga.id).values_list("status", flat=True)
    wait_until(lambda: set(statuses.all()) == {NodeStatus.COMPLETED}, what="both nodes to complete")


def _events(saga: Saga, event_type: str) -> list[str]:
    return _events_of(saga.id, event_type)


def _events_of(saga_id: object, event_type: str) -> list[str]:
    rows = AuditEvent.objects.filter(saga_id=saga_id, event_type=event_type)
    return sorted(str(step_id) for step_id in rows.values_list("step_id", flat=True))


def _assert_each_step_completed_once(saga: Saga, downstream: RecordingHTTPServer) -> None:
    steps = sorted(str(s) for s in Step.objects.filter(saga_id=saga.id).values_list("id", flat=True))
    assert len(steps) == 2
    assert set(Step.objects.filter(saga_id=saga.id).values_list("status", flat=True)) == {StepStatus.COMPLETED}
    assert _events(saga, "STEP_COMPLETED") == steps  # once each
    assert _events(saga, "STEP_STARTED") == steps  # b was claimed once, in a's commit
    assert _events(saga, "STALE_WRITE_REFUSED") == []
    assert [len(downstream.requests_to(p)) for p in ("/once_a", "/once_b")] == [1, 1]  # each action called once
    assert Saga.objects.get(pk=saga.pk).status == SagaStatus.ACTIVE
    assert verify_chain(saga.id).valid


@pytest.mark.postgres_only
@pipelined
def test_a_record_cut_off_by_a_terminated_connection_is_recorded_again(
    on_postgresql: None,
    operator: Principal,
    downstream: RecordingHTTPServer,
    linear: Saga,
    cut_before_record: Cuts,
    caplog: pytest.LogCaptureFixture,
    pipeline: bool,
) -> None:
    with caplog.at_level(logging.WARNING, logger="sagas.coordinator"):
        _run_to_completion(operator, linear)
    assert cut_before_record.made == 1
    assert any("lost its database connection" in r.getMessage() for r in caplog.records)
    _assert_each_step_completed_once(linear, downstream)


@pytest.mark.postgres_only
@pipelined
def test_a_commit_whose_answer_was_lost_is_found_recorded_and_not_written_again(
    on_postgresql: None,
    operator: Principal,
    downstream: RecordingHTTPServer,
    linear: Saga,
    answer_lost_after_commit: Cuts,
    caplog: pytest.LogCaptureFixture,
    pipeline: bool,
) -> None:
    with caplog.at_level(logging.INFO, logger="sagas.coordinator"):
        _run_to_completion(operator, linear)
    assert answer_lost_after_commit.made == 1
    assert answer_lost_after_commit.committed_before_the_cut  # the fault hit after the outcome was durable
    assert any("was already recorded" in r.getMessage() for r in caplog.records)
    # and the next node, claimed in the commit whose answer was lost, ran at once (not after its lease ran out)
    _assert_each_step_completed_once(linear, downstream)


@pytest.mark.postgres_only
def test_an_immediate_step_cut_off_while_recording_completes_once(
    on_postgresql: None, operator: Principal, downstream: RecordingHTTPServer, linear: Saga, cut_before_record: Cuts
) -> None:
    step = coordinator.saga_step_execute(actor=operator, saga_id=linear.id, action="once_a", input={})
    assert cut_before_record.made == 1
    assert step.status == StepStatus.COMPLETED
    assert _events(linear, "STEP_COMPLETED") == [str(step.id)]
    assert len(downstream.requests_to("/once_a")) == 1
    assert verify_chain(linear.id).valid


@pytest.mark.postgres_only
def test_a_record_that_keeps_losing_its_connection_is_left_to_the_sweep(
    on_postgresql: None,
    operator: Principal,
    downstream: RecordingHTTPServer,
    linear: Saga,
    cut_before_record: Cuts,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    cut_before_record.left = 1 + len(record_retry.RETRY_PAUSES)  # every try of the record
    sent: list[tuple[Any, Any]] = []
    monkeypatch.setattr(nudges, "nudge_node", lambda saga_id, node_id, delay=0.0: sent.append((saga_id, node_id)))
    coordinator.saga_run_ready(actor=operator, saga_id=linear.id, wait_seconds=0)
    # the nudged node run here, as the Celery task runs it: the error reaches the task, whose autoretry finds the
    # node EXECUTING under its lease and does nothing (as before this fix)
    with caplog.at_level(logging.WARNING, logger="sagas.coordinator"), pytest.raises(OperationalError):
        coordinator.node_execute(saga_id=sent[0][0], node_id=sent[0][1])
    assert any("Could not record" in r.getMessage() for r in caplog.records)
    assert cut_before_record.made == 1 + len(record_retry.RETRY_PAUSES)
    a = Node.objects.get(saga_id=linear.id, key="a")
    assert a.status == NodeStatus.EXECUTING and a.lease_expires_at is not None  # as before: the sweep's to settle
    assert Step.objects.get(pk=a.step_id).status == StepStatus.EXECUTING
    assert _events(linear, "STEP_COMPLETED") == []
    assert len(downstream.requests_to("/once_a")) == 1
    assert verify_chain(linear.id).valid


@dataclass
class Noted:
    """How often each attempt's follow-up ran and was undone (its commit rolled back)."""

    follow_ups: list[int] = field(default_factory=list)
    undone: list[int] = field(default_factory=list)

    def recording(self, i: int, claim: Claim) -> Recording:
        def follow_up(tx: Any) -> None:
            self.follow_ups.append(i)

        return Recording(claim, Outcome(ok=True, result={"n": i}), follow_up, lambda: self.undone.append(i))


@pytest.fixture
def claimed(operator: Principal, monkeypatch: pytest.MonkeyPatch) -> list[Claim]:
    """Three independent nodes of one saga, each claimed (EXECUTING under its lease) by this test."""
    sent: list[tuple[Any, Any]] = []
    monkeypatch.setattr(nudges, "nudge_node", lambda saga_id, node_id, delay=0.0: sent.append((saga_id, node_id)))
    register(NOOP)
    saga = coordinator.saga_begin(actor=operator)
    for i in range(3):
        coordinator.node_plan(actor=operator, saga_id=saga.id, action="noop", input={}, key=f"n{i}")
    coordinator.saga_run_ready(actor=operator, saga_id=saga.id, max_parallel=3, wait_seconds=0)
    found = [node_attempts._claim_nudged(saga_id, node_id) for saga_id, node_id in sent]
    return [claim for claim in found if claim is not None]


@pytest.mark.postgres_only
@pytest.mark.parametrize(
    ("fault", "follow_ups", "undone"),
    [
        ("cut_before_commit", [0, 1, 2, 0, 1, 2], [0, 1, 2]),  # rolled back: undone, then run again
        ("answer_lost_after_commit", [0, 1, 2], []),  # committed: kept, not run again
    ],
)
def test_a_shared_record_cut_off_is_recorded_again_with_its_follow_ups_undone_only_if_rolled_back(
    on_postgresql: None,
    claimed: list[Claim],
    request: pytest.FixtureRequest,
    fault: str,
    follow_ups: list[int],
    undone: list[int],
) -> None:
    assert len(claimed) == 3
    cuts: Cuts = request.getfixturevalue(fault)
    noted = Noted()
    answers = attempts.record_outcomes([noted.recording(i, claim) for i, claim in enumerate(claimed)])
    assert cuts.made == 1
    assert [verdict for verdict, _ in answers] == ["completed"] * 3
    assert (noted.follow_ups, noted.undone) == (follow_ups, undone)
    saga_id = claimed[0].saga_id
    assert sorted(_events_of(saga_id, "STEP_COMPLETED")) == sorted(str(c.step_id) for c in claimed)
    assert _events_of(saga_id, "STALE_WRITE_REFUSED") == []
    assert verify_chain(saga_id).valid


def test_an_error_that_leaves_the_connection_usable_is_not_retried() -> None:
    connection.ensure_connection()
    tries: list[int] = []

    def deadlocked(retry: int) -> None:
        tries.append(retry)
        raise OperationalError("deadlock detected")

    with pytest.raises(OperationalError):
        record_retry.retry_on_lost_connection(deadlocked, what="a record")
    assert tries == [0]
