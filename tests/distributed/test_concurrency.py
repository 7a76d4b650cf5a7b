"""Races on one database: concurrent step inserts, and sweepers competing for the same sagas."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from django.db import connections

from audit.models import AuditEvent
from governance.identity.principal import Principal
from registry.services import registry_load_file
from sagas import coordinator, selectors
from sagas.models import Step
from sagas.states import SagaStatus
from tests.httpserver import RecordingHTTPServer
from tests.sagas.helpers import sagas_with_lost_workers, wait_until

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "action_registry.json"


def _together(count: int, work: Callable[[int], Any]) -> list[Any]:
    """Run `work(i)` on `count` threads released at the same moment; re-raise the first error."""
    start = threading.Barrier(count, timeout=30)
    results: list[Any] = [None] * count
    errors: list[BaseException] = []

    def run(i: int) -> None:
        try:
            start.wait()
            results[i] = work(i)
        except BaseException as exc:
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    if errors:
        raise errors[0]
    return results


def test_24_concurrent_steps_get_sequences_1_to_24(operator: Principal):
    # given one saga and 24 callers executing a step on it at the same moment
    registry_load_file(EXAMPLES)
    saga = coordinator.saga_begin(actor=operator)
    # when
    _together(
        24, lambda i: coordinator.saga_step_execute(actor=operator, saga_id=saga.id, action="noop", input={"i": i})
    )
    # then every step got its own sequence, without gaps, and the audit chain still verifies
    assert sorted(Step.objects.filter(saga=saga).values_list("sequence", flat=True)) == list(range(1, 25))
    from audit.chain import verify_chain

    assert verify_chain(saga.id).valid


def test_two_sweepers_recover_each_saga_exactly_once(operator: Principal, downstream: RecordingHTTPServer):
    # given several sagas whose in-flight attempts lost their worker (pause mode: each is escalated once)
    sagas = sagas_with_lost_workers(operator, downstream, 6, hang=5.0)
    # when two sweepers run at the same moment
    reports = _together(2, lambda i: coordinator.sagas_recover())
    # then each saga was recovered by exactly one of them
    assert sum(r.nodes_recovered for r in reports) == 6
    recovered = Counter(AuditEvent.objects.filter(event_type="NODE_RECOVERED").values_list("saga_id", flat=True))
    assert recovered == Counter({saga.id: 1 for saga in sagas})
    assert {s.status for s in selectors.saga_list(actor=operator, limit=10).sagas} == {SagaStatus.RECOVERY_REQUIRED}
    # and the six stalled attempts, when they finally answer, are refused by the fence
    wait_until(
        lambda: AuditEvent.objects.filter(event_type="STALE_WRITE_REFUSED").count() == 6,
        timeout=30,
        what="the stalled attempts' late writes to be refused",
    )
