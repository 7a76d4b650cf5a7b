"""The hot path costs a fixed number of queries: recording a node's outcome and claiming the next node in the same
commit does not grow with the saga's history, and a fan-out is promoted and nudged in batches, not per node (the
nodes claimed in that commit for this process's fan-out threads cost their own claim each).

The counts include the transaction's own BEGIN/COMMIT where the backend reports them. They pin the round trips
that docs/benchmarks.md accounts for; a change that adds one must say why here.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from governance.identity.principal import Principal
from sagas import coordinator
from sagas.coordinator.execution import fan_out, node_attempts, nudges
from sagas.coordinator.execution.attempts import Claim
from sagas.executor import Outcome
from sagas.models import Node
from sagas.states import NodeStatus
from tests.contracts import register
from tests.sagas.helpers import wait_until

# Recording COMPLETED(N) and claiming N+1: lock (+ kill switch flag), own check, step and node updates, the
# dependants query and their promotion, the ready-with-capacity query (which also reads the pinned contract's
# registry row), the step insert, the claim, the audit insert and the saga row (sequence, run budget and chain
# head together), within BEGIN/COMMIT.
CHAINED_STEP_MAX_QUERIES = 13
# One more ready node claimed in the same commit for a fan-out thread: its step insert and its claim.
FAN_OUT_CLAIM_QUERIES = 2

NOOP = {
    "id": "noop",
    "version": "1.0.0",
    "kind": "builtin",
    "semantic": {
        "domain": "test",
        "operation": "noop",
        "resource": "nothing",
        "risk": "low",
        "reversibility": "reversible",
    },
    "input_schema": {"type": "object"},
    "output_schema": {"type": "object"},
    "execution_policy": {"idempotent": True},
    "forward": {"builtin": "noop"},
    "compensation": {"builtin": "noop"},
}


@pytest.fixture
def recorded_nudges(monkeypatch: pytest.MonkeyPatch) -> list[tuple[Any, Any]]:
    """Nudges are recorded instead of run, so the test drives each claim itself on one connection."""
    sent: list[tuple[Any, Any]] = []
    monkeypatch.setattr(nudges, "nudge_node", lambda saga_id, node_id, delay=0.0: sent.append((saga_id, node_id)))
    register(NOOP)
    return sent


def _plan(actor: Principal, saga_id: object, key: str, after: list[str]) -> Node:
    return coordinator.node_plan(actor=actor, saga_id=saga_id, action="noop", input={}, key=key, depends_on=after)


def _record_counting(claim: Claim) -> tuple[int, Claim | None]:
    with CaptureQueriesContext(connection) as queries:
        chained = node_attempts._record(claim, Outcome(ok=True, result={}))
    return len(queries.captured_queries), chained


def test_a_chained_step_costs_the_same_fixed_queries_at_every_position(
    operator: Principal, recorded_nudges: list[tuple[Any, Any]]
) -> None:
    saga = coordinator.saga_begin(actor=operator)
    previous: list[str] = []
    for i in range(6):
        previous = [_plan(operator, saga.id, f"n{i}", previous).key or ""]
    coordinator.saga_run_ready(actor=operator, saga_id=saga.id, max_parallel=1, wait_seconds=0)
    claim = node_attempts._claim_nudged(*recorded_nudges[0])
    counts = []
    while claim is not None:
        count, claim = _record_counting(claim)
        counts.append(count)
    # The last record has no next node to claim, so it is cheaper; every chained one costs the same.
    assert len(counts) == 6
    assert len(set(counts[:-1])) == 1, counts
    assert counts[0] <= CHAINED_STEP_MAX_QUERIES, counts
    assert counts[-1] < counts[0]
    assert set(Node.objects.filter(saga=saga).values_list("status", flat=True)) == {NodeStatus.COMPLETED}


@pytest.mark.parametrize("width", [4, 16])
def test_a_fan_out_is_promoted_and_nudged_in_constant_queries(
    operator: Principal,
    recorded_nudges: list[tuple[Any, Any]],
    width: int,
    settings: Any,
) -> None:
    settings.SAGA_FAN_OUT_THREADS = 2  # fewer than the leaves, so some are claimed here and some nudged
    saga = coordinator.saga_begin(actor=operator)
    _plan(operator, saga.id, "root", [])
    for i in range(width):
        _plan(operator, saga.id, f"leaf{i}", ["root"])
    coordinator.saga_run_ready(actor=operator, saga_id=saga.id, max_parallel=32, wait_seconds=0)
    claim = node_attempts._claim_nudged(*recorded_nudges.pop())
    assert claim is not None
    count, chained = _record_counting(claim)
    assert chained is not None  # one leaf is claimed for this thread, in the same commit
    assert len(recorded_nudges) == width - 3  # two more for this process's fan-out threads, the rest nudged
    # Same statements for 4 and 16 leaves: the promotion and the nudge bookkeeping are single statements, and each
    # leaf claimed for a fan-out thread costs its step insert and its claim (its audit event joins the batch).
    assert count == CHAINED_STEP_MAX_QUERIES + 2 * FAN_OUT_CLAIM_QUERIES + 1, count  # + the UPDATE of nudged leaves
    # The fan-out threads run their leaves and chain on into the leaves still READY: all but this thread's.
    leaves = Node.objects.filter(saga=saga, key__startswith="leaf")
    wait_until(
        lambda: fan_out.busy_threads() == 0 and leaves.filter(status=NodeStatus.COMPLETED).count() == width - 1,
        what="the fan-out threads to run every other leaf",
    )
    assert leaves.get(pk=chained.node_id).status == NodeStatus.EXECUTING
    assert node_attempts._record(chained, Outcome(ok=True, result={})) is None
    assert set(leaves.values_list("status", flat=True)) == {NodeStatus.COMPLETED}
