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
