from __future__ import annotations

from typing import Any

import pytest

from registry.contracts import backoff_seconds, has_compensation, resolved_execution_policy

POLICY = {
    "max_attempts": 10,
    "initial_backoff_seconds": 1.0,
    "backoff_multiplier": 2.0,
    "max_backoff_seconds": 8.0,
    "jitter": 0.1,
}


def test_backoff_deterministic_for_seed_and_attempt() -> None:
    # given the same step id and attempt
    # when the delay is computed twice
    first = backoff_seconds(POLICY, 3, "step-1")
    second = backoff_seconds(POLICY, 3, "step-1")
    # then it is the same value, and another step gets another value
    assert first == second
    assert backoff_seconds(POLICY, 3, "step-2") != first


@pytest.mark.parametrize(("attempt", "base"), [(1, 1.0), (2, 2.0), (3, 4.0), (4, 8.0), (5, 8.0), (50, 8.0)])
def test_backoff_exponential_capped_within_jitter(attempt: int, base: float) -> None:
    # given a 1 s initial delay doubling up to 8 s with 10% jitter
    # when delays are computed for many steps
    delays = [backoff_seconds(POLICY, attempt, f"step-{n}") for n in range(200)]
    # then each stays within +/-10% of the capped exponential base, and jitter actually spreads them
    assert all(base * 0.9 <= delay <= base * 1.1 for delay in delays)
    assert max(delays) - min(delays) > base * 0.1


def test_backoff_huge_attempt_does_not_overflow() -> None:
    # given an absurd attempt number
    # when
    delay = backoff_seconds(POLICY, 100_000, "step")
    # then it is capped, not an OverflowError
    assert delay <= 8.0 * 1.1


def test_backoff_zero_jitter_is_exact() -> None:
    # given no jitter
    # when / then
    assert backoff_seconds({**POLICY, "jitter": 0}, 2, "any") == 2.0


def test_backoff_attempt_below_one_refused() -> None:
    with pytest.raises(ValueError, match="attempt starts at 1"):
        backoff_seconds(POLICY, 0, "step")


def test_resolved_execution_policy_fills_defaults(builtin_contract: dict[str, Any]) -> None:
    # given a contract that sets only one forward field
    builtin_contract["execution_policy"] = {"forward": {"max_attempts": 7}}
    # when resolved
    policy = resolved_execution_policy(builtin_contract)
    # then every field has a value
    assert policy == {
        "forward": {
            "max_attempts": 7,
            "initial_backoff_seconds": 0.5,
            "backoff_multiplier": 2.0,
            "max_backoff_seconds": 30.0,
            "jitter": 0.1,
        },
        "compensation": {
            "max_attempts": 5,
            "initial_backoff_seconds": 0.5,
            "backoff_multiplier": 2.0,
            "max_backoff_seconds": 30.0,
            "jitter": 0.1,
        },
        "failure_mode": "rollback",
        "approval_required": False,
        "idempotent": False,
    }


def test_has_compensation_reflects_contract(builtin_contract: dict[str, Any]) -> None:
    assert has_compensation(builtin_contract)
    del builtin_contract["compensation"]
    assert not has_compensation(builtin_contract)
