"""Gate texts are written for an LLM: what did not run, why (class, rule, budget), do not retry or work around
it, and the durable path forward."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from governance.identity.principal import Principal
from governance.kill_switch import kill_switch_engage
from sagas import coordinator
from sagas.errors import SagaError
from sagas.models import Step
from tests.conftest import make_principal
from tests.contracts import http_contract, register
from tests.httpserver import RecordingHTTPServer


def _assert_gate(error: SagaError, code: str, *needles: str) -> None:
    assert error.code == code
    text = error.message
    assert "was NOT executed" in text and "Do not retry" in text and "do not work around" in text
    for needle in needles:
        assert needle in text, (needle, text)


def _use_policy(tmp_path: Path, settings: Any, tenant: dict[str, Any]) -> None:
    document = {"schema_version": 1, "revision": "r7", "default_effect": "allow", "tenants": {"acme": tenant}}
    (tmp_path / "p.json").write_text(json.dumps(document))
    settings.SAGA_POLICY_MODE, settings.SAGA_POLICY_FILE = "json", str(tmp_path / "p.json")


def test_an_action_that_needs_approval_is_not_executed_immediately(
    operator: Principal, downstream: RecordingHTTPServer
) -> None:
    register(http_contract("wire", downstream.url, approval_required=True))
    saga = coordinator.saga_begin(actor=operator)
    with pytest.raises(SagaError) as held:
        coordinator.saga_step_execute(actor=operator, saga_id=saga.id, action="wire", input={})
    _assert_gate(held.value, "APPROVAL_REQUIRED", "wire@1.0.0", "its contract", "plan_saga_step", "WAITING_APPROVAL")
    assert downstream.requests == [] and not Step.objects.filter(saga=saga).exists()


def test_a_policy_denial_names_the_rule_and_the_way_forward(
    operator: Principal, downstream: RecordingHTTPServer, tmp_path: Path, settings: Any
) -> None:
    rule = {"id": "no-wires", "effect": "deny", "reason": "wires need finance", "match": {"actions": ["wire"]}}
    _use_policy(tmp_path, settings, {"rules": [rule]})
    register(http_contract("wire", downstream.url))
    saga = coordinator.saga_begin(actor=operator)
    with pytest.raises(SagaError) as denied:
        coordinator.node_plan(actor=operator, saga_id=saga.id, action="wire", input={})
    _assert_gate(denied.value, "POLICY_DENIED", "no-wires", "wires need finance", "r7", "operator of your tenant")


def test_a_budget_refusal_names_the_budget(
    operator: Principal, downstream: RecordingHTTPServer, tmp_path: Path, settings: Any
) -> None:
    _use_policy(tmp_path, settings, {"budgets": {"max_planned_nodes": 1}})
    register(http_contract("step", downstream.url))
    saga = coordinator.saga_begin(actor=operator)
    coordinator.node_plan(actor=operator, saga_id=saga.id, action="step", input={})
    with pytest.raises(SagaError) as over:
        coordinator.node_plan(actor=operator, saga_id=saga.id, action="step", input={"n": 2})
    _assert_gate(over.value, "POLICY_DENIED", "budget max_planned_nodes", "roll back")
    assert over.value.as_dict()["gate"] == "budget"


def test_the_kill_switch_says_what_stopped_and_how_work_resumes(
    operator: Principal, downstream: RecordingHTTPServer
) -> None:
    register(http_contract("step", downstream.url))
    saga = coordinator.saga_begin(actor=operator)
    kill_switch_engage(actor=make_principal("root", "acme", "admin"), reason="incident 7")
    with pytest.raises(SagaError) as stopped:
        coordinator.saga_step_execute(actor=operator, saga_id=saga.id, action="step", input={})
    _assert_gate(stopped.value, "KILL_SWITCH_ENGAGED", "incident 7", "release the switch", "Rollback")
    with pytest.raises(SagaError) as refused:
        coordinator.saga_begin(actor=operator)
    _assert_gate(refused.value, "KILL_SWITCH_ENGAGED", "Starting a saga")
