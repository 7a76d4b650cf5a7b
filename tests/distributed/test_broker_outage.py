"""A Redis outage while dispatching loses no node: the row stays READY and the sweep re-sends its nudge."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from governance.identity.principal import Principal
from sagas import coordinator
from sagas.coordinator import recovery
from sagas.models import Node
from sagas.states import NodeStatus
from tests.contracts import http_contract, register
from tests.distributed.conftest import point_celery_at, require_postgresql
from tests.distributed.workers import CeleryWorker, RedisServer
from tests.httpserver import RecordingHTTPServer
from tests.sagas.helpers import wait_until


def test_redis_outage_while_dispatching_loses_no_node(
    tmp_path: Path,
    settings: object,
    monkeypatch: pytest.MonkeyPatch,
    operator: Principal,
    downstream: RecordingHTTPServer,
):
    require_postgresql()
    broker = RedisServer(tmp_path).start()
    worker = None
    try:
        # given a worker on a broker that goes down just before a run is requested
        settings.CELERY_BROKER_URL = broker.url  # type: ignore[attr-defined]
        point_celery_at(broker.url)
        worker = CeleryWorker(broker.url, tmp_path).start()
        register(http_contract("ship", downstream.url))
        saga = coordinator.saga_begin(actor=operator)
        node = coordinator.node_plan(actor=operator, saga_id=saga.id, action="ship", input={})
        broker.stop()
        # when the run is requested during the outage
        started = time.monotonic()
        report = coordinator.saga_run_ready(actor=operator, saga_id=saga.id, wait_seconds=0)
        # then the request still answers (the lost nudge is logged, not raised) and the node is still READY
        assert time.monotonic() - started < 15
        assert report.count(NodeStatus.READY) == 1 and downstream.requests == []
        # when the broker is back and the sweep runs
        broker.start()
        monkeypatch.setattr(recovery, "NUDGE_RESEND_SECONDS", 0.0)

        def resent_and_done() -> bool:
            if Node.objects.get(pk=node.pk).status == NodeStatus.COMPLETED:
                return True
            coordinator.sagas_recover()
            return False

        # then the node is re-dispatched and runs exactly once
        wait_until(resent_and_done, timeout=90, what="the node to be re-dispatched and completed")
        assert len(downstream.requests_to("/ship")) == 1
    finally:
        if worker is not None:
            worker.stop()
        broker.stop()
