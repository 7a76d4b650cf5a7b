"""Fan-out without broker hops (sagas.coordinator.execution.fan_out): the ready dependants of a finishing node are
claimed in
its commit, one for the finishing thread and one per free fan-out thread of this process, within the run's capacity;
only those beyond are nudged. Every such claim is an ordinary claim: leased, fenced, checked and audited."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from audit.chain import verify_chain
from audit.models import AuditEvent
from audit.models import EventType as E
from governance.identity.principal import Principal
from governance.kill_switch import kill_switch_engage
from sagas import coordinator
from sagas.coordinator._leases import worker_id
from sagas.coordinator.execution import fan_out, node_attempts, nudges
from sagas.executor import Outcome
from sagas.models import Node, Saga, Step
from sagas.states import NodeStatus, SagaStatus, StepStatus
from tests.conftest import make_principal
from tests.contracts import http_contract, register
from tests.httpserver import RecordingHTTPServer
from tests.sagas.helpers import wait_until
from tests.startup import refused_at_start_up


@pytest.fixture(autouse=True)
def _fan_out_threads_done() -> Iterator[None]:
    """The database is emptied after each test: no fan-out thread may still be using it then."""
    yield
    wait_until(lambda: fan_out.busy_threads() == 0, what="the fan-out threads to finish")


@pytest.fixture
def recorded_nudges(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Nudged node ids, recorded instead of sent, so only the test and the fan-out threads run nodes."""
    sent: list[Any] = []
    monkeypatch.setattr(nudges, "nudge_node", lambda saga_id, node_id, delay=0.0: sent.append(node_id))
    return sent


def _fan_out_saga(actor: Principal, width: int, leaf: str = "leaf", join: bool = True) -> Saga:
    saga = coordinator.saga_begin(actor=actor)
    coordinator.node_plan(actor=actor, saga_id=saga.id, action="root", input={}, key="root")
    leaves = [f"leaf{i}" for i in range(width)]
    for key in leaves:
        coordinator.node_plan(
            actor=actor, saga_id=saga.id, action=leaf, input={"key": key}, key=key, depends_on=["root"]
        )
    if join:
        coordinator.node_plan(actor=actor, saga_id=saga.id, action="join", input={}, key="join", depends_on=leaves)
    return saga


def _register(downstream: RecordingHTTPServer, *names: str) -> None:
    for name in names:
        register(http_contract(name, downstream.url))


def _root_claim(operator: Principal, saga: Saga, nudged: list[Any], max_parallel: int = 32) -> Any:
    coordinator.saga_run_ready(actor=operator, saga_id=saga.id, max_parallel=max_parallel, wait_seconds=0)
    claim = node_attempts._claim_nudged(saga.id, nudged.pop())
    assert claim is not None
    return claim


def _started_in_the_commit_of(saga: Saga, key: str) -> list[str]:
    """Node ids whose attempt started in the commit that completed node `key` (a commit's events are contiguous in
    the saga's chain, and every later commit that records an attempt starts with that attempt's outcome)."""
    events = list(AuditEvent.objects.filter(saga_id=saga.id).order_by("sequence"))
    finished = str(Node.objects.get(saga=saga, key=key).id)
    start = next(i for i, e in enumerate(events) if e.event_type == E.NODE_COMPLETED and e.node_id == finished)
    started = []
    for event in events[start + 1 :]:
        if event.event_type in (E.STEP_COMPLETED, E.STEP_FAILED, E.STEP_ATTEMPT_FAILED, E.STALE_WRITE_REFUSED):
            break
        if event.event_type == E.STEP_STARTED:
            started.append(event.node_id)
    return started


def test_a_1_16_1_fan_out_runs_every_node_exactly_once_with_a_valid_chain(
    operator: Principal, downstream: RecordingHTTPServer
) -> None:
    _register(downstream, "root", "leaf", "join")
    saga = _fan_out_saga(operator, 16)
    report = coordinator.saga_run_ready(actor=operator, saga_id=saga.id, max_parallel=32)
    assert report.count("COMPLETED") == 18, report.saga.error
    nodes = Node.objects.filter(saga=saga)
    assert set(nodes.values_list("status", flat=True)) == {NodeStatus.COMPLETED}
    assert set(nodes.values_list("attempts", flat=True)) == {1}
    # Exactly one call per node, each with its own step as idempotency key, and one started step each.
    keys = [r.headers.get("Idempotency-Key") for r in downstream.requests]
    assert len(keys) == 18 and len(set(keys)) == 18
    assert Step.objects.filter(saga=saga, status=StepStatus.COMPLETED).count() == 18
    assert AuditEvent.objects.filter(saga_id=saga.id, event_type=E.STEP_STARTED).count() == 18
    assert downstream.requests[0].path == "/root" and downstream.requests[-1].path == "/join"
    assert verify_chain(saga.id).valid


def test_nodes_beyond_the_fan_out_threads_are_nudged_and_the_claimed_ones_hold_fenced_leases(
    operator: Principal, downstream: RecordingHTTPServer, recorded_nudges: list[Any], settings: Any
) -> None:
    settings.SAGA_FAN_OUT_THREADS = 2
    _register(downstream, "root", "leaf")
    saga = _fan_out_saga(operator, 6, join=False)
    chained = node_attempts._record(_root_claim(operator, saga, recorded_nudges), Outcome(ok=True, result={}))
    assert chained is not None
    # One leaf chained here, two for the fan-out threads, the other three nudged (possibly again later by a thread
    # that finishes its leaf while the other thread is busy: a duplicate nudge, never a second claim).
    leaves = Node.objects.filter(saga=saga, key__startswith="leaf")
    started_in_root_commit = _started_in_the_commit_of(saga, "root")
    assert len(started_in_root_commit) == 3
    assert chained.node_id and str(chained.node_id) == started_in_root_commit[0]
    assert {str(n) for n in recorded_nudges}.isdisjoint(started_in_root_commit)
    assert len({str(n) for n in recorded_nudges}) == 3
    # The threads ran theirs and chained on into the nudged leaves; the one held here is still leased to us.
    wait_until(
        lambda: fan_out.busy_threads() == 0 and leaves.filter(status=NodeStatus.COMPLETED).count() == 5,
        what="the fan-out threads to run five leaves",
    )
    held = leaves.get(pk=chained.node_id)
    assert held.status == NodeStatus.EXECUTING and held.lease_owner == worker_id() and held.lease_expires_at
    assert held.fence_token == chained.fence == 1
    assert node_attempts._record(chained, Outcome(ok=True, result={})) is None
    assert set(leaves.values_list("attempts", flat=True)) == {1}
    assert len(downstream.requests_to("/leaf")) == 5  # the held leaf's call was never made; its outcome was given
    assert verify_chain(saga.id).valid


def test_leaves_claimed_for_fan_out_threads_are_in_flight_under_a_lease_and_fence(
    operator: Principal, downstream: RecordingHTTPServer, recorded_nudges: list[Any], settings: Any
) -> None:
    settings.SAGA_FAN_OUT_THREADS = 2
    _register(downstream, "root", "leaf")
    downstream.barrier("/leaf", parties=3, timeout=10)  # the two threads' calls wait for the one made here
    saga = _fan_out_saga(operator, 3, join=False)
    chained = node_attempts._record(_root_claim(operator, saga, recorded_nudges), Outcome(ok=True, result={}))
    assert chained is not None and recorded_nudges == []
    leaves = Node.objects.filter(saga=saga, key__startswith="leaf")
    wait_until(lambda: len(downstream.requests_to("/leaf")) == 2, what="both fan-out threads calling their leaf")
    for node in leaves.exclude(pk=chained.node_id):
        # Exactly what a claim after a nudge writes: recovery reclaims it if this process dies now.
        assert node.status == NodeStatus.EXECUTING and node.lease_owner == worker_id()
        assert node.fence_token == 1 and node.lease_expires_at is not None
        assert node.step is not None and node.step.status == StepStatus.EXECUTING
    assert node_attempts._run_claim(chained) is None  # the third call meets the other two at the barrier
    wait_until(lambda: fan_out.busy_threads() == 0, what="the fan-out threads to finish")
    assert set(leaves.values_list("status", flat=True)) == {NodeStatus.COMPLETED}
    assert verify_chain(saga.id).valid


def test_max_parallel_bounds_what_a_finishing_node_claims(
    operator: Principal, downstream: RecordingHTTPServer, recorded_nudges: list[Any]
) -> None:
    _register(downstream, "root", "leaf")
    saga = _fan_out_saga(operator, 6, join=False)
    chained = node_attempts._record(
        _root_claim(operator, saga, recorded_nudges, max_parallel=3), Outcome(ok=True, result={})
    )
    # max_parallel 3, and the root just finished: this thread's leaf and two for fan-out threads; nothing nudged,
    # the other leaves wait for capacity and are claimed by whichever attempt finishes next.
    assert chained is not None and recorded_nudges == []
    assert len(_started_in_the_commit_of(saga, "root")) == 3
    while chained is not None:
        chained = node_attempts._run_claim(chained)
    leaves = Node.objects.filter(saga=saga, key__startswith="leaf")
    wait_until(
        lambda: fan_out.busy_threads() == 0 and leaves.filter(status=NodeStatus.COMPLETED).count() == 6,
        what="every leaf to complete",
    )
    assert downstream.max_in_flight("/leaf") <= 3
    assert len(downstream.requests_to("/leaf")) == 6


def test_a_kill_switch_engaged_before_the_finishing_commit_stops_every_dependant(
    operator: Principal, downstream: RecordingHTTPServer, recorded_nudges: list[Any]
) -> None:
    _register(downstream, "root", "leaf", "join")
    saga = _fan_out_saga(operator, 8)
    claim = _root_claim(operator, saga, recorded_nudges)
    kill_switch_engage(actor=make_principal("root", "acme", "admin"), reason="incident 9")
    assert node_attempts._record(claim, Outcome(ok=True, result={})) is None
    assert fan_out.busy_threads() == 0  # nothing was claimed for the threads either
    assert downstream.requests == []
    assert not Step.objects.filter(saga=saga, node__key__startswith="leaf").exists()
    assert Node.objects.get(saga=saga, key="root").status == NodeStatus.COMPLETED
    assert verify_chain(saga.id).valid


def test_a_policy_denying_the_dependants_stops_them_with_zero_executions(
    operator: Principal, downstream: RecordingHTTPServer, tmp_path: Path, settings: Any
) -> None:
    _register(downstream, "root", "transfer", "join")
    saga = _fan_out_saga(operator, 8, leaf="transfer")
    freeze = {
        "id": "freeze",
        "effect": "deny",
        "reason": "frozen",
        "match": {"actions": ["transfer"], "phases": ["run"]},
    }
    document = {
        "schema_version": 1,
        "revision": "r1",
        "default_effect": "allow",
        "tenants": {"acme": {"rules": [freeze]}},
    }
    (tmp_path / "p.json").write_text(json.dumps(document))
    settings.SAGA_POLICY_MODE, settings.SAGA_POLICY_FILE = "json", str(tmp_path / "p.json")
    report = coordinator.saga_run_ready(actor=operator, saga_id=saga.id, max_parallel=32)
    assert report.saga.status == SagaStatus.RECOVERY_REQUIRED
    assert [r.path for r in downstream.requests] == ["/root"]
    assert not Step.objects.filter(saga=saga, action="transfer").exists()
    assert not Node.objects.filter(saga=saga, status=NodeStatus.EXECUTING).exists()
    assert verify_chain(saga.id).valid


def test_no_fan_out_threads_nudges_every_dependant_as_before(
    operator: Principal, downstream: RecordingHTTPServer, recorded_nudges: list[Any], settings: Any
) -> None:
    settings.SAGA_FAN_OUT_THREADS = 0
    _register(downstream, "root", "leaf")
    saga = _fan_out_saga(operator, 4, join=False)
    chained = node_attempts._record(_root_claim(operator, saga, recorded_nudges), Outcome(ok=True, result={}))
    assert chained is not None and len(_started_in_the_commit_of(saga, "root")) == 1
    assert len(recorded_nudges) == 3 and fan_out.busy_threads() == 0


@pytest.mark.parametrize("value", ["-1", "257", "eight"])
def test_a_fan_out_thread_count_out_of_range_stops_start_up(value: str) -> None:
    refused_at_start_up("SAGA_FAN_OUT_THREADS", value)
