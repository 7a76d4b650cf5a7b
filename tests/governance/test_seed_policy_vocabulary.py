"""semantic-saga-mcp's policy vocabulary accepted with its meaning; a useless OPA timeout refused at start; a
decision without a revision never says None."""

from __future__ import annotations

from typing import Any

import pytest

from governance.policy.facts import PolicyInput, decision_from_result, fail_closed
from governance.policy.json_rules import JsonPolicy
from registry.semantics import reversibility_of, risk_of
from saga_project.checks import opa_timeout_check


def _facts(**given: Any) -> PolicyInput:
    base: dict[str, Any] = {
        "tenant_id": "acme",
        "principal_id": "p",
        "principal_type": "user",
        "roles": frozenset(),
        "scopes": frozenset(),
        "phase": "plan",
    }
    return PolicyInput(**{**base, **given})


def test_seed_words_map_onto_ours():
    assert [reversibility_of(v) for v in ("full", "configured", "implementation-defined", "partial", None)] == [
        "reversible",
        "compensable",
        "unknown",
        "unknown",
        "unknown",
    ]
    assert [risk_of(v) for v in ("High", "unknown", "extreme", 3)] == ["high", "unknown", "unknown", "unknown"]


def test_seed_policy_shapes_load_and_mean_what_they_meant():
    # no revision, string conditions, globbed risks, an "unknown" weight and threshold, an empty-tenant wildcard
    policy = JsonPolicy(
        {
            "schema_version": 1,
            "risk_weights": {"Unknown": 7, "custom": 1},
            "tenants": {
                "*": {"approval_at_or_above_risk": "unknown", "default_effect": "allow"},
                "acme": {"rules": [{"id": "r", "effect": "deny", "match": {"phases": "plan", "risks": "crit*"}}]},
            },
        }
    )
    assert policy.revision == "unversioned"
    assert policy.risk_units("unknown") == 7 and policy.risk_units("nonsense") == 7
    assert policy.evaluate(_facts(risk="critical")).matched_rules == ("r",)
    # the threshold "unknown" asks approval for everything, as in the seed
    assert policy.evaluate(_facts(risk="low")).effect == "require_approval"
    assert policy.evaluate(_facts(risk="low", phase="approve")).effect == "allow"


def test_a_decision_without_revision_names_none_of_python():
    assert fail_closed("opa", None, "OPA could not be asked (ValueError)").revision == "unknown"
    assert decision_from_result(True, backend="opa", revision=None).revision == "unknown"
    assert decision_from_result({"effect": "allow"}, backend="opa", revision=None).revision == "unknown"
    assert decision_from_result({"effect": "allow", "revision": "b-7"}, backend="opa", revision=None).revision == "b-7"


@pytest.mark.parametrize("timeout", [-3.0, 0.0, float("nan"), float("inf")])
def test_a_useless_opa_timeout_is_refused_at_start(settings: Any, timeout: float):
    settings.SAGA_POLICY_MODE = "opa"
    settings.SAGA_OPA_TIMEOUT_SECONDS = timeout
    (error,) = opa_timeout_check()
    assert error.id == "saga.E024"
    assert "SAGA_OPA_TIMEOUT_SECONDS" in error.msg and "--policy-opa-timeout" in error.msg


def test_a_positive_opa_timeout_or_another_mode_passes(settings: Any):
    settings.SAGA_POLICY_MODE = "opa"
    settings.SAGA_OPA_TIMEOUT_SECONDS = 0.5
    assert opa_timeout_check() == []
    settings.SAGA_POLICY_MODE = "none"
    settings.SAGA_OPA_TIMEOUT_SECONDS = -3.0
    assert opa_timeout_check() == []
