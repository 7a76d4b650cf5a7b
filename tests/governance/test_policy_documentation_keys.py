"""Notes in a JSON policy file: `title`, `description`, `comment` and `$comment` load in the file, a tenant section
and a rule, and change no decision; every other unknown key is refused at start, naming the closest known key and
what to do. Loaded as the server loads it at start (the policy system check, the configuration report) and at a
decision (governance.policy.engine)."""

from __future__ import annotations

import copy
import json
from itertools import product
from pathlib import Path
from typing import Any

import pytest

from governance.checks import policy_check
from governance.policy import engine
from governance.policy.facts import Decision
from governance.policy.json_rules import DOCUMENTATION_KEYS
from saga_project.checks import configuration_report
from tests.governance.facts import policy_facts

ROOT = Path(__file__).resolve().parents[2]
SEED_POLICY = ROOT / "tests" / "seed_parity" / "seed_files" / "governance_policy.json"
OUR_EXAMPLE = ROOT / "examples" / "governance_policy.json"


def annotated(document: dict[str, Any]) -> dict[str, Any]:
    """`document` with every documentation key, in every kind of value, wherever notes are accepted."""
    notes: dict[str, Any] = {
        "title": "Production governance",
        "description": "Owned by the platform team; reviewed every quarter.",
        "comment": ["Lines of a longer note,", "kept as a list."],
        "$comment": {"ticket": "OPS-311", "reviewed": True},
    }
    document = {**copy.deepcopy(document), **notes}
    for tenant, section in document["tenants"].items():
        section.update({key: f"{key} of {tenant}" for key in DOCUMENTATION_KEYS})
        for rule in section.get("rules", []):
            # a note that reads like a reason, and a title that reads like an effect: neither is read
            rule.update({"description": "deny everything", "title": "allow", "comment": None, "$comment": 7})
    return document


def use_policy(settings: Any, tmp_path: Path, document: Any, name: str = "policy.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(document), encoding="utf-8")
    settings.SAGA_POLICY_MODE = "json"
    settings.SAGA_POLICY_FILE = str(path)
    return path


def what_decided(decision: Decision) -> tuple[Any, ...]:
    return (decision.effect, decision.reason, decision.revision, decision.matched_rules, decision.budget)


FACTS = [
    policy_facts(tenant_id=tenant, phase=phase, risk=risk, principal_type=kind, action=action, **counters)
    for tenant, phase, risk, kind, action, counters in product(
        ["acme", "finance", "globex"],
        ["plan", "execute", "run", "approve"],
        ["low", "medium", "high", "critical", "unknown"],
        ["user", "service", "agent"],
        ["create_service_record", "delete_prod_db", "charge_card"],
        [{}, {"saga_risk_units": 79, "saga_planned_nodes": 39, "saga_steps": 99, "requested_parallel": 9}],
    )
]


@pytest.mark.django_db
@pytest.mark.parametrize("source", [SEED_POLICY, OUR_EXAMPLE], ids=["seed example", "our example"])
def test_notes_everywhere_they_are_accepted_load_at_start_and_change_no_decision(
    source: Path, settings: Any, tmp_path: Path
):
    plain = json.loads(source.read_text(encoding="utf-8"))
    # given the file as written, every decision over a matrix of facts, through the engine the coordinator calls
    use_policy(settings, tmp_path, plain, "plain.json")
    assert policy_check() == []
    before = [what_decided(engine.evaluate(facts)) for facts in FACTS]
    statuses = [engine.policy_status(tenant) for tenant in ("acme", "finance", "globex")]
    # when the same file carries notes in the file, in each tenant section and in each rule
    use_policy(settings, tmp_path, annotated(plain), "annotated.json")
    # then start-up accepts it, and every decision and status is the same
    assert policy_check() == []
    assert configuration_report("semantic-saga serve") is None
    assert [what_decided(engine.evaluate(facts)) for facts in FACTS] == before
    assert [engine.policy_status(tenant) for tenant in ("acme", "finance", "globex")] == statuses
    assert {effect for effect, *_ in before} == {"allow", "deny", "require_approval"}  # the matrix decides each way


@pytest.mark.django_db
def test_a_rules_description_is_not_its_reason(settings: Any, tmp_path: Path):
    rule = {"id": "no-cards", "effect": "deny", "description": "Ticket OPS-311", "match": {"actions": ["charge_*"]}}
    use_policy(settings, tmp_path, {"schema_version": 1, "tenants": {"acme": {"rules": [rule]}}})
    decision = engine.evaluate(policy_facts())
    assert (decision.effect, decision.reason, decision.matched_rules) == (
        "deny",
        "rule no-cards matched",
        ("no-cards",),
    )


def refusal(settings: Any, tmp_path: Path, document: dict[str, Any]) -> str:
    """The policy check's one error for `document`, as `serve` would print it."""
    use_policy(settings, tmp_path, document)
    (error,) = policy_check()
    assert error.id == "saga.E021"
    report = configuration_report("semantic-saga serve")
    assert report is not None and "saga.E021" in report and error.msg in report
    return error.msg


def with_acme(**section: Any) -> dict[str, Any]:
    return {"schema_version": 1, "tenants": {"acme": section}}


@pytest.mark.parametrize(
    ("document", "named"),
    [
        # a misspelled budget: the closest known key, and nothing more to do than spell it
        (
            with_acme(budgets={"max_paralel": 3}),
            "tenants.acme.budgets.max_paralel: unknown key 'max_paralel' (did you mean max_parallel? Correct the "
            "spelling)",
        ),
        (
            with_acme(rules=[{"id": "r", "effect": "deny", "match": {"action": ["x"]}}]),
            "tenants.acme.rules[0].match.action: unknown key 'action' (did you mean actions?",
        ),
        (
            with_acme(defualt_effect="allow"),
            "tenants.acme.defualt_effect: unknown key 'defualt_effect' (did you mean default_effect?",
        ),
        # a misspelled note is a typo too
        ({"schema_version": 1, "tenants": {}, "descripton": "x"}, "did you mean description?"),
        # a key one level off: where it belongs
        (
            {"schema_version": 1, "tenants": {}, "max_paralel": 3},
            "max_paralel: unknown key 'max_paralel' (did you mean max_parallel? It belongs in a tenant's budgets",
        ),
        (
            with_acme(rules=[{"id": "r", "effect": "deny", "actions": ["x"]}]),
            "tenants.acme.rules[0].actions: unknown key 'actions' (actions belongs in a rule's match, not here",
        ),
        # nothing close: the keys allowed there, and where a note may go
        (
            {"schema_version": 1, "tenants": {}, "owner": "ops"},
            "owner: unknown key 'owner' (the keys here are schema_version, revision, default_effect, risk_weights, "
            "tenants; remove it, or keep a note in description, comment, $comment, title)",
        ),
    ],
    ids=["budget typo", "match typo", "tenant typo", "note typo", "budget at top", "condition in rule", "unknown"],
)
def test_other_unknown_keys_are_refused_naming_the_closest_known_key(
    document: dict[str, Any], named: str, settings: Any, tmp_path: Path
):
    message = refusal(settings, tmp_path, document)
    assert named in message, message
    assert message.startswith("SAGA_POLICY_FILE: ") and "Nothing was loaded" in message


@pytest.mark.parametrize("where", ["budgets", "match"])
def test_notes_are_refused_among_limits_and_conditions_with_where_they_go(where: str, settings: Any, tmp_path: Path):
    if where == "budgets":
        document, path = with_acme(budgets={"max_parallel": 2, "comment": "x"}), "tenants.acme.budgets.comment"
    else:
        rule = {"id": "r", "effect": "deny", "match": {"actions": ["x"], "comment": "x"}}
        document, path = with_acme(rules=[rule]), "tenants.acme.rules[0].match.comment"
    message = refusal(settings, tmp_path, document)
    assert f"{path}: unknown key 'comment'" in message
    assert "keep a note in the enclosing rule's or tenant's description" in message


def test_a_note_directly_under_tenants_is_explained(settings: Any, tmp_path: Path):
    message = refusal(settings, tmp_path, {"schema_version": 1, "tenants": {"description": "our tenants"}})
    assert "tenants.description: 'our tenants' is not of type 'object'" in message
    assert "tenants is keyed by tenant id" in message and "the file's own description" in message


def test_every_unknown_key_is_named_once(settings: Any, tmp_path: Path):
    document = {
        "schema_version": 1,
        "tenants": {"acme": {"budgets": {"max_paralel": 1, "max_step_per_saga": 2}}},
        "x": 1,
    }
    message = refusal(settings, tmp_path, document)
    assert message.count("unknown key") == 3
    assert "did you mean max_parallel?" in message and "did you mean max_steps_per_saga?" in message
