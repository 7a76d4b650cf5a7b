"""semantic-saga-mcp's own example registry and policy files (verbatim in seed_files/, see its README) load at start
unchanged, keep their words in the snapshot and the hash, and a plan against them gets semantic-saga-mcp's decision.

The seed's meaning, from its docs/policy_governance.md and docs/action_registry.md: budgets first, then the
tenant's rules, then wildcard rules, then the approval threshold, then the default effect; its risk weights (here
medium 2, unknown 3) count against max_risk_units; its reversibility "full" is our reversible.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from audit.canonical import sha256_hex
from audit.models import AuditEvent
from governance.checks import policy_check
from governance.identity.principal import Principal
from governance.policy.facts import PolicyInput
from governance.policy.json_rules import JsonPolicy
from registry.checks import actions_file_check
from registry.contracts import definition_hash, validate_registry_document
from registry.selectors import action_get
from registry.services import action_register, registry_load_file
from sagas import coordinator
from sagas.errors import SagaError
from sagas.states import NodeStatus
from tests.conftest import make_principal

SEED_FILES = Path(__file__).with_name("seed_files")
REGISTRY = SEED_FILES / "action_registry.json"
POLICY = SEED_FILES / "governance_policy.json"
REVISION = "2026-08-31-example"


def _facts(**given: Any) -> PolicyInput:
    semantic = json.loads(REGISTRY.read_text())["actions"][0]["semantic"]
    values: dict[str, Any] = {
        "tenant_id": "acme",
        "principal_id": "alice",
        "principal_type": "user",
        "roles": frozenset({"operator"}),
        "scopes": frozenset(),
        "phase": "plan",
        "action": "create_service_record",
        "domain": semantic["domain"],
        "operation": semantic["operation"],
        "resource": semantic["resource"],
        "risk": semantic["risk"],
        "reversibility": semantic["reversibility"],
    }
    return PolicyInput(**{**values, **given})


def test_the_seed_files_are_the_upstream_bytes():
    # the files are kept exactly as upstream ships them (sizes of the upstream files at the commits in README.md)
    assert len(REGISTRY.read_text(encoding="utf-8")) == 2105
    assert len(POLICY.read_text(encoding="utf-8")) == 1884


def test_start_up_checks_accept_both_seed_files(settings: Any):
    # given the seed's files named as `semantic-saga-mcp --actions ... --policy-mode json --policy-file ...` names them
    settings.SAGA_ACTIONS_FILE = str(REGISTRY)
    settings.SAGA_POLICY_MODE = "json"
    settings.SAGA_POLICY_FILE = str(POLICY)
    # then the start-up checks find nothing to refuse
    assert actions_file_check() == []
    assert policy_check() == []


def test_the_registry_keeps_the_seed_words_and_hashes_what_the_file_says():
    document = json.loads(REGISTRY.read_text())
    (contract,) = validate_registry_document(document)
    # the definition hash is over the contract as written, without `active` (nothing translated into it)
    written = {key: value for key, value in document["actions"][0].items() if key != "active"}
    assert definition_hash(contract) == sha256_hex(written)
    assert contract["semantic"]["reversibility"] == "full"
    assert contract["semantic"]["effects"] == {"creates": ["service_management.service_record"]}


@pytest.mark.django_db
def test_loading_the_seed_registry_registers_it_unchanged():
    registry_load_file(REGISTRY)
    row = action_get("create_service_record")
    assert row.version == "1.0.0"
    assert row.definition["semantic"]["compensation_guarantee"] == "delete-created-resource"
    assert row.definition_hash == definition_hash(json.loads(REGISTRY.read_text())["actions"][0])


def test_the_seed_policy_decides_as_the_seed_does():
    policy = JsonPolicy.load(POLICY)
    assert policy.revision == REVISION
    # the seed's vocabulary reaches the policy as ours
    assert _facts().reversibility == "reversible"
    # medium risk, below the wildcard threshold (high): the wildcard default effect, allow
    allowed = policy.evaluate(_facts())
    assert (allowed.effect, allowed.revision) == ("allow", REVISION)
    # high risk: approval required by the threshold
    assert policy.evaluate(_facts(risk="high")).effect == "require_approval"
    # a service principal approving high risk: the wildcard rule denies
    refused = policy.evaluate(_facts(phase="approve", risk="high", principal_type="service"))
    assert (refused.effect, refused.matched_rules) == ("deny", ("service-principals-cannot-approve-high-risk",))
    # finance: the seed's weights (medium 2) against its own risk-unit budget of 80
    assert policy.risk_units("medium") == 2 and policy.risk_units("unknown") == 3
    assert policy.evaluate(_facts(tenant_id="finance", saga_risk_units=78)).effect == "allow"
    over = policy.evaluate(_facts(tenant_id="finance", saga_risk_units=79))
    assert over.effect == "deny" and over.reason.startswith("risk-unit budget exceeded: requested 81, limit 80")
    # finance: a service agent deleting production is refused by the tenant's rule
    delete = policy.evaluate(_facts(tenant_id="finance", action="delete_prod_db", principal_type="service"))
    assert delete.matched_rules == ("block-production-delete-from-service-agent",)


@pytest.mark.django_db(transaction=True)
def test_a_plan_against_the_seed_files_gets_the_seed_decision(settings: Any, operator: Principal):
    # given the seed's registry loaded and its policy in force
    settings.SAGA_POLICY_MODE = "json"
    settings.SAGA_POLICY_FILE = str(POLICY)
    registry_load_file(REGISTRY)
    saga = coordinator.saga_begin(actor=operator)
    # when its action is planned
    node = coordinator.node_plan(
        actor=operator, saga_id=saga.id, action="create_service_record", input={"name": "billing"}
    )
    # then policy allows it (medium risk, default allow) and the contract's approval_required gates it, as in the seed
    assert node.status == NodeStatus.WAITING_APPROVAL
    decision = AuditEvent.objects.filter(saga_id=saga.id, event_type="POLICY_DECISION").get().data
    assert (decision["effect"], decision["revision"], decision["risk"]) == ("allow", REVISION, "medium")


@pytest.mark.django_db(transaction=True)
def test_a_service_principal_cannot_approve_high_risk_under_the_seed_policy(settings: Any):
    # given the seed's policy and its action at high risk (the seed's "service-principals-cannot-approve-high-risk")
    settings.SAGA_POLICY_MODE = "json"
    settings.SAGA_POLICY_FILE = str(POLICY)
    document = json.loads(REGISTRY.read_text())
    document["actions"][0]["semantic"]["risk"] = "high"
    action_register(document["actions"][0])
    agent = Principal(
        principal_id="svc",
        tenant_id="acme",
        principal_type="service",
        roles=frozenset({"operator"}),
        authenticated=True,
        protocol="test",
    )
    person = make_principal("alice", "acme", "operator")
    saga = coordinator.saga_begin(actor=person)
    node = coordinator.node_plan(actor=person, saga_id=saga.id, action="create_service_record", input={"name": "x"})
    assert node.status == NodeStatus.WAITING_APPROVAL
    with pytest.raises(SagaError) as caught:
        coordinator.node_approve(actor=agent, saga_id=saga.id, node_id=node.id)
    assert "High-risk approvals require a human principal" in str(caught.value)


@pytest.mark.django_db(transaction=True)
def test_a_contract_that_declares_no_risk_is_decided_at_unknown_risk(settings: Any, operator: Principal):
    # given the seed's action with its risk left out (the seed reads a missing risk as unknown, not as low)
    settings.SAGA_POLICY_MODE = "json"
    settings.SAGA_POLICY_FILE = str(POLICY)
    document = json.loads(REGISTRY.read_text())
    del document["actions"][0]["semantic"]["risk"]
    action_register(document["actions"][0])
    saga = coordinator.saga_begin(actor=operator)
    # when it is planned
    coordinator.node_plan(actor=operator, saga_id=saga.id, action="create_service_record", input={"name": "x"})
    # then policy saw unknown risk
    decision = AuditEvent.objects.filter(saga_id=saga.id, event_type="POLICY_DECISION").get().data
    assert decision["risk"] == "unknown"
