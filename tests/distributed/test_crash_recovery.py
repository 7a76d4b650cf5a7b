"""A worker killed with SIGKILL mid-action: after its lease expires, the sweep applies exactly what the contract
prescribes, nothing is lost, and no step ever runs under two identities."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from audit.models import AuditEvent
from governance.identity.principal import Principal
from sagas import coordinator
from sagas.models import Node, Saga, Step
from sagas.states import NodeStatus, SagaStatus, StepStatus
from tests.contracts import http_contract, register
from tests.distributed.conftest import point_celery_at, require_postgresql
from tests.distributed.workers import CeleryWorker
from tests.httpserver import RecordingHTTPServer
from tests.sagas.helpers import idempotency_keys, wait_until

HANG_SECONDS = 60.0  # far longer than the test: the call is still "in progress" when its worker dies
LEASE_SECONDS = 3


@pytest.fixture
def workers(broker_url: str, settings: object, tmp_path: Path) -> Iterator[list[CeleryWorker]]:
    require_postgresql()
    redis.Redis.from_url(broker_url).flushdb()
    settings.CELERY_BROKER_URL = broker_url  # type: ignore[attr-defined]
    point_celery_at(broker_url)
    started: list[CeleryWorker] = []
    yield started
    for worker in started:
        worker.stop()


def _start(workers: list[CeleryWorker], broker_url: str, tmp_path: Path) -> CeleryWorker:
    worker = CeleryWorker(broker_url, tmp_path, lease_seconds=LEASE_SECONDS).start()
    workers.append(worker)
    return worker


def _sweep_until_recovered(what: str) -> None:
    def recovered() -> bool:
        report = coordinator.sagas_recover()
        return report.nodes_recovered + report.rollbacks_started > 0

    wait_until(recovered, timeout=LEASE_SECONDS * 10, what=what)


@pytest.mark.parametrize(
    ("failure_mode", "idempotent", "final_saga", "final_node"),
    [
        ("rollback", False, SagaStatus.ROLLED_BACK, NodeStatus.COMPENSATED),
        ("pause", False, SagaStatus.RECOVERY_REQUIRED, NodeStatus.FAILED),
        ("pause", True, SagaStatus.ACTIVE, NodeStatus.COMPLETED),
    ],
    ids=["rollback-compensates", "pause-escalates", "idempotent-reruns"],
)
def test_worker_killed_mid_action_gets_the_outcome_its_contract_prescribes(
    workers: list[CeleryWorker],
    broker_url: str,
    tmp_path: Path,
    operator: Principal,
    downstream: RecordingHTTPServer,
    failure_mode: str,
    idempotent: bool,
    final_saga: str,
    final_node: str,
):
    # given a worker in the middle of a call that will not answer
    victim = _start(workers, broker_url, tmp_path)
    register(http_contract("transfer", downstream.url, failure_mode=failure_mode, idempotent=idempotent))
    downstream.script("/transfer", [(200, {"id": "t1"}, HANG_SECONDS)])
    saga = coordinator.saga_begin(actor=operator)
    node = coordinator.node_plan(actor=operator, saga_id=saga.id, action="transfer", input={"amount": "10"})
    coordinator.saga_run_ready(actor=operator, saga_id=saga.id, wait_seconds=0)
    wait_until(lambda: len(downstream.requests_to("/transfer")) == 1, what="the call to reach the downstream")
    # when the worker is killed outright and another one takes over after the lease expires
    victim.kill()
    _start(workers, broker_url, tmp_path)
    _sweep_until_recovered("the sweep to reclaim the expired lease")
    wait_until(
        lambda: Saga.objects.get(pk=saga.id).status == final_saga and Node.objects.get(pk=node.pk).status == final_node,
        timeout=60,
        what=f"saga {final_saga} / node {final_node}",
    )
    # then nothing ran under a second identity
    node.refresh_from_db()
    step = Step.objects.get(pk=node.step_id)
    assert set(idempotency_keys(downstream, "/transfer")) == {str(step.id)}
    undo_keys = idempotency_keys(downstream, "/transfer/undo")
    if failure_mode == "rollback":
        assert undo_keys == [f"{step.id}:rollback"] and step.status == StepStatus.COMPENSATED
    else:
        assert undo_keys == []
    if idempotent:
        assert len(downstream.requests_to("/transfer")) == 2 and step.status == StepStatus.COMPLETED
    else:
        assert node.uncertain_outcome and step.uncertain_outcome
        assert len(downstream.requests_to("/transfer")) == 1


def test_interrupted_rollback_resumes_with_the_same_compensation_key(
    workers: list[CeleryWorker],
    broker_url: str,
    tmp_path: Path,
    operator: Principal,
    downstream: RecordingHTTPServer,
):
    # given a failed saga whose rollback worker dies inside the compensation call
    victim = _start(workers, broker_url, tmp_path)
    register(http_contract("reserve", downstream.url))
    register(http_contract("charge", downstream.url, max_attempts=1))
    downstream.script("/charge", [(400, {"error": "declined"})])
    downstream.script("/reserve/undo", [(200, {}, HANG_SECONDS)])
    saga = coordinator.saga_begin(actor=operator)
    coordinator.node_plan(actor=operator, saga_id=saga.id, action="reserve", input={}, key="reserve")
    coordinator.node_plan(
        actor=operator, saga_id=saga.id, action="charge", input={}, key="charge", depends_on=["reserve"]
    )
    coordinator.saga_run_ready(actor=operator, saga_id=saga.id, wait_seconds=0)
    wait_until(lambda: len(downstream.requests_to("/reserve/undo")) == 1, timeout=60, what="the compensation call")
    assert Saga.objects.get(pk=saga.id).status == SagaStatus.ROLLING_BACK
    # when the runner is killed and the sweep finds the rollback lease expired
    victim.kill()
    _start(workers, broker_url, tmp_path)
    _sweep_until_recovered("the sweep to resume the rollback")
    wait_until(lambda: Saga.objects.get(pk=saga.id).status == SagaStatus.ROLLED_BACK, timeout=60, what="ROLLED_BACK")
    # then the compensation was repeated with the same key, and no step was compensated twice in the journal
    reserve_step = Step.objects.get(saga=saga, action="reserve")
    assert idempotency_keys(downstream, "/reserve/undo") == [f"{reserve_step.id}:rollback"] * 2
    assert reserve_step.status == StepStatus.COMPENSATED


def test_frozen_worker_that_wakes_up_after_a_takeover_cannot_record_its_outcome(
    workers: list[CeleryWorker],
    broker_url: str,
    tmp_path: Path,
    operator: Principal,
    downstream: RecordingHTTPServer,
):
    # given an idempotent node whose worker freezes mid-call (heartbeats stop with it)
    frozen = _start(workers, broker_url, tmp_path)
    register(http_contract("sync", downstream.url, idempotent=True))
    downstream.script("/sync", [(200, {"from": "frozen"}, 1.0)])
    saga = coordinator.saga_begin(actor=operator)
    node = coordinator.node_plan(actor=operator, saga_id=saga.id, action="sync", input={})
    coordinator.saga_run_ready(actor=operator, saga_id=saga.id, wait_seconds=0)
    wait_until(lambda: len(downstream.requests_to("/sync")) == 1, what="the call to start")
    frozen.pause()
    try:
        # when its lease expires, the sweep hands the node to another worker, which completes it
        _start(workers, broker_url, tmp_path)
        _sweep_until_recovered("the sweep to reclaim the frozen worker's lease")
        wait_until(lambda: Node.objects.get(pk=node.pk).status == NodeStatus.COMPLETED, timeout=60, what="takeover")
    finally:
        frozen.resume()
    # then the frozen worker, awake again with the stale fence token, is refused and audited
    wait_until(
        lambda: AuditEvent.objects.filter(saga_id=saga.id, event_type="STALE_WRITE_REFUSED").exists(),
        timeout=60,
        what="the frozen worker's late write to be refused",
    )
    step = Step.objects.get(pk=Node.objects.get(pk=node.pk).step_id)
    assert step.status == StepStatus.COMPLETED and step.result != {"from": "frozen"}
    assert set(idempotency_keys(downstream, "/sync")) == {str(step.id)}
