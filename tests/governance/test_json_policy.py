"""The JSON policy backend: file validation, evaluation order, budgets, thresholds, globs."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from governance.policy.facts import PolicyFileError
from governance.policy.json_rules import JsonPolicy, policy_schema
from tests.governance.facts import policy_facts

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "governance_policy.json"


_facts = policy_facts


@pytest.fixture
def example() -> JsonPolicy:
    return JsonPolicy.load(EXAMPLE)


def _policy(**tenants: Any) -> JsonPolicy:
    return JsonPolicy({"schema_version": 1, "revision": "r1", "default_effect": "deny", "tenants": tenants})


def test_published_schema_is_the_one_the_code_uses():
    published = json.loads((ROOT / "docs" / "governance_policy.schema.json").read_text())
    assert published == policy_schema()


def test_example_policy_loads_and_reports_its_status(example: JsonPolicy):
    status = example.status("acme")
    assert status["revision"] == "2026-11-29.1" and status["approval_at_or_above_risk"] == "high"
    assert status["budgets"]["max_parallel"] == 8 and status["budgets"]["max_planned_nodes"] == 40
    assert status["rule_ids"][:2] == ["acme-no-payments-by-agents", "acme-approvers-only"]


def test_invalid_file_names_the_offending_path(tmp_path: Path):
    document = json.loads(EXAMPLE.read_text())
    document["tenants"]["acme"]["rules"][1]["effect"] = "maybe"
    document["tenants"]["acme"]["budgets"]["max_parallel"] = 0
    path = tmp_path / "policy.json"
    path.write_text(json.dumps(document))
    with pytest.raises(PolicyFileError) as refused:
        JsonPolicy.load(path)
    assert "tenants.acme.rules[1].effect" in refused.value.message
    assert "tenants.acme.budgets.max_parallel" in refused.value.message
    assert str(path) in refused.value.message and "Nothing was loaded" in refused.value.message


def test_tenant_rules_come_before_wildcard_rules_in_file_order():
    policy = _policy(
        acme={
            "rules": [
                {"id": "first", "effect": "require_approval", "match": {"actions": ["charge_*"]}},
                {"id": "second", "effect": "deny", "match": {"actions": ["charge_card"]}},
            ]
        },
        **{"*": {"rules": [{"id": "wild", "effect": "allow", "match": {"actions": ["*"]}}]}},
    )
    assert policy.evaluate(_facts()).matched_rules == ("first",)
    assert policy.evaluate(_facts(action="ship_parcel")).matched_rules == ("wild",)
    assert policy.evaluate(_facts(tenant_id="globex", action="charge_card")).matched_rules == ("wild",)


@pytest.mark.parametrize(
    ("pattern", "action", "hit"),
    [
        ("charge_*", "charge_card", True),
        ("charge_?ard", "charge_card", True),
        ("charge", "charge_card", False),
        ("*_card", "refund_card", True),
        ("Charge_*", "charge_card", False),
    ],
)
def test_action_globs(pattern: str, action: str, hit: bool):
    policy = _policy(acme={"rules": [{"id": "r", "effect": "allow", "match": {"actions": [pattern]}}]})
    assert (policy.evaluate(_facts(action=action)).matched_rules == ("r",)) is hit


def test_role_and_scope_conditions():
    rule = {
        "id": "r",
        "effect": "allow",
        "match": {
            "roles_all": ["operator", "payments"],
            "roles_none": ["intern"],
            "scopes_any": ["semantic-saga:execute"],
        },
    }
    policy = _policy(acme={"rules": [rule]})
    ok = _facts(roles=frozenset({"operator", "payments"}), scopes=frozenset({"semantic-saga:execute"}))
    assert policy.evaluate(ok).effect == "allow"
    assert policy.evaluate(_facts(roles=frozenset({"operator"}), scopes=ok.scopes)).effect == "deny"
    intern = _facts(roles=frozenset({"operator", "payments", "intern"}), scopes=ok.scopes)
    assert policy.evaluate(intern).effect == "deny"


@pytest.mark.parametrize(
    ("facts", "budget"),
    [
        ({"phase": "plan", "saga_planned_nodes": 40}, "max_planned_nodes"),
        ({"phase": "run", "saga_steps": 50}, "max_steps_per_saga"),
        ({"phase": "execute", "saga_steps": 50}, "max_steps_per_saga"),
        ({"phase": "plan", "saga_risk_units": 91, "risk": "high"}, "max_risk_units"),
        ({"phase": "run", "requested_parallel": 9}, "max_parallel"),
    ],
)
def test_budgets_refuse_the_next_unit_and_name_the_budget(example: JsonPolicy, facts: dict[str, Any], budget: str):
    decision = example.evaluate(_facts(**facts))
    assert decision.effect == "deny" and decision.budget == budget and budget in decision.reason


def test_budgets_allow_up_to_the_limit(example: JsonPolicy):
    assert example.evaluate(_facts(phase="plan", saga_planned_nodes=39)).budget is None
    assert example.evaluate(_facts(phase="run", requested_parallel=8)).budget is None


def test_budgets_come_before_rules(example: JsonPolicy):
    agent = _facts(phase="run", principal_type="agent", requested_parallel=99)
    assert example.evaluate(agent).budget == "max_parallel"


def test_risk_threshold_requires_approval(example: JsonPolicy):
    decision = example.evaluate(_facts(risk="high"))
    assert decision.effect == "require_approval" and decision.matched_rules == ("threshold:high",)
    # below the threshold no rule decides: acme has no default of its own, so the wildcard section's (allow) applies
    assert example.evaluate(_facts(risk="medium")).effect == "allow"
    assert _policy(acme={}).evaluate(_facts()).effect == "deny"  # no section default at all: the file's (deny)


def test_irreversible_and_unknown_need_approval_where_the_tenant_says_so(example: JsonPolicy):
    for reversibility in ("irreversible", "unknown"):
        decision = example.evaluate(_facts(tenant_id="globex", reversibility=reversibility, operation="send"))
        assert decision.effect == "require_approval" and reversibility in decision.reason
    assert example.evaluate(_facts(tenant_id="globex", operation="send")).effect == "allow"


def test_rules_bind_non_forward_phases_too(example: JsonPolicy):
    viewer = _facts(phase="approve", roles=frozenset({"viewer"}))
    assert example.evaluate(viewer).matched_rules == ("acme-approvers-only",)


def test_duplicate_rule_ids_are_refused():
    rules = [{"id": "same", "effect": "allow"}, {"id": "same", "effect": "deny"}]
    with pytest.raises(PolicyFileError) as refused:
        _policy(acme={"rules": rules})
    assert "tenants.acme.rules[1].id: duplicate rule id 'same'" in refused.value.message


def test_decision_input_never_carries_payloads():
    fields = set(_facts().as_dict())
    assert not fields & {"input", "result", "data", "metadata", "headers", "body"}
    assert copy.deepcopy(_facts().as_dict())["roles"] == ["operator"]
