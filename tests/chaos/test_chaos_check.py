"""The chaos suite's own check of the downstream's record against the journal (bench/chaos_check.py)."""

from __future__ import annotations

import uuid

import pytest

from bench.chaos_check import READ_TOOLS, Arrival, effects

pytestmark = pytest.mark.django_db


def _arrival(tool: str) -> Arrival:
    return Arrival(str(uuid.uuid4()), repr([("name", "a")]), True, tool)


def test_the_downstreams_reads_are_the_tools_it_marks_read_only() -> None:
    assert {"chaos_get"} == READ_TOOLS


def test_a_read_without_a_step_is_counted_as_lost_only_when_a_proxy_was_killed() -> None:
    read = _arrival("chaos_get")
    lost: list[str] = []
    assert effects([read], proxied=True, lost_reads=lost) == []
    assert lost == [read.key]
    # no proxy killed (no list to count into): the same record is a violation
    expected = f"key {read.key} reached the downstream but no such step {read.key} exists"
    assert effects([read], proxied=True) == [expected]


def test_a_write_without_a_step_is_a_violation_even_after_a_proxy_kill() -> None:
    write = _arrival("chaos_put")
    lost: list[str] = []
    assert effects([write], proxied=True, lost_reads=lost) != []
    assert lost == []


def test_a_read_key_sent_twice_without_a_step_is_a_violation() -> None:
    read = _arrival("chaos_get")
    lost: list[str] = []
    assert effects([read, read], proxied=True, lost_reads=lost) != []
    assert lost == []


def _proxied_step(status: str, uncertain: bool) -> str:
    from sagas.models import Saga, Step

    saga = Saga.objects.create(tenant_id="t", creator_principal_id="agent", kind="PROXY_SESSION")
    step = Step.objects.create(
        saga=saga,
        sequence=1,
        action="proxy.chaos.chaos_put",
        action_version="0.0.0",
        action_definition_hash="0" * 64,
        action_definition={},
        status=status,
        uncertain_outcome=uncertain,
    )
    return str(step.id)


def test_a_step_journaled_done_that_never_arrived_is_a_violation_even_once_compensated() -> None:
    for status in ("COMPLETED", "COMPENSATED"):
        step_id = _proxied_step(status, uncertain=False)
        assert effects([], proxied=True) == [
            f"step {step_id} of saga {_saga_of(step_id)} is {status} but never reached the downstream"
        ]
        _delete(step_id)


def test_an_uncertain_step_compensated_without_having_arrived_is_no_violation() -> None:
    # Its proxy died with the call journaled and perhaps not sent: the rollback ran the compensation anyway.
    step_id = _proxied_step("COMPENSATED", uncertain=True)
    rollback = Arrival(f"{step_id}:rollback", repr([("name", "a")]), True, "chaos_delete")
    assert effects([rollback], proxied=True) == []


def _saga_of(step_id: str) -> str:
    from sagas.models import Step

    return str(Step.objects.get(id=step_id).saga_id)


def _delete(step_id: str) -> None:
    from sagas.models import Step

    Step.objects.filter(id=step_id).delete()
