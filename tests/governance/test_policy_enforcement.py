"""Tenant policy (JSON backend) enforced by the coordinator at plan, execute, run, approve, commit."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from audit.models import AuditEvent
from governance.identity.principal import Principal
from sagas import coordinator
from sagas.errors import SagaError
from sagas.models import Node, Step
from sagas.states import NodeStatus, SagaStatus
from tests.contracts import http_contract, register
from tests.httpserver import RecordingHTTPServer


@pytest.fixture(autouse=True)
def _committed_db(transactional_db: None) -> None:
    """Runs use executor threads: rows must be committed."""


@pytest.fixture
def use_policy(tmp_path: Path, settings: Any) -> Any:
    def apply(tenant: dict[str, Any], name: str = "policy.json") -> None:
        document = {"schema_version": 1, "revision": name, "default_effect": "allow", "tenants": {"acme": tenant}}
        path = tmp_path / name
        path.write_text(json.dumps(document))
        settings.SAGA_POLICY_MODE = "json"
        settings.SAGA_POLICY_FILE = str(path)

    return apply


def _decisions(saga_id: object) -> list[dict[str, Any]]:
    events = AuditEvent.objects.filter(saga_id=saga_id, event_type="POLICY_DECISION").order_by("sequence")
    return [e.data for e in events]


def test_threshold_gates_the_node_and_the_approved_node_runs_once(
    use_policy: Any, operator: Principal, approver: Principal, downstream: RecordingHTTPServer
):
    # given a tenant that wants a person to approve anything high-risk
    use_policy({"approval_at_or_above_risk": "high"})
    contract = http_contract("wire", downstream.url)
    contract["semantic"]["risk"] = "high"
    register(contract)
    saga = coordinator.saga_begin(actor=operator)
    # when planned, the node waits for approval (requested by the policy)
    node = coordinator.node_plan(actor=operator, saga_id=saga.id, action="wire", input={"amount": "10"})
    assert node.status == NodeStatus.WAITING_APPROVAL
    assert node.approvals.get().requested_by == "policy:threshold:high"
    coordinator.saga_run_ready(actor=operator, saga_id=saga.id)
    assert downstream.requests == []
    # when approved and run
    coordinator.node_approve(actor=approver, saga_id=saga.id, node_id=node.id)
    coordinator.saga_run_ready(actor=operator, saga_id=saga.id)
    # then it ran exactly once
    assert len(downstream.requests_to("/wire")) == 1
    assert Node.objects.get(pk=node.pk).status == NodeStatus.COMPLETED


def test_budget_refuses_the_next_plan_naming_the_budget_and_keeps_the_evidence(
    use_policy: Any, operator: Principal, downstream: RecordingHTTPServer
):
    use_policy({"budgets": {"max_planned_nodes": 2}})
    register(http_contract("step", downstream.url))
    saga = coordinator.saga_begin(actor=operator)
    for i in range(2):
        coordinator.node_plan(actor=operator, saga_id=saga.id, action="step", input={"i": i})
    with pytest.raises(SagaError) as refused:
        coordinator.node_plan(actor=operator, saga_id=saga.id, action="step", input={"i": 3})
    assert refused.value.code == "POLICY_DENIED" and "max_planned_nodes" in refused.value.message
    assert "Do not retry" in refused.value.message
    assert Node.objects.filter(saga=saga).count() == 2
    last = _decisions(saga.id)[-1]
    assert last["effect"] == "deny" and last["budget"] == "max_planned_nodes" and last["counters"]["planned_nodes"] == 2


def test_policy_tightened_after_planning_stops_the_run_with_zero_executions(
    use_policy: Any, operator: Principal, downstream: RecordingHTTPServer
):
    # given a node planned while the policy allowed it
    use_policy({})
    register(http_contract("transfer", downstream.url))
    saga = coordinator.saga_begin(actor=operator)
    node = coordinator.node_plan(actor=operator, saga_id=saga.id, action="transfer", input={})
    # when the policy now denies transfers and the saga runs
    use_policy(
        {
            "rules": [
                {
                    "id": "freeze",
                    "effect": "deny",
                    "reason": "transfers frozen",
                    "match": {"actions": ["transfer"], "phases": ["run"]},
                }
            ]
        },
        name="frozen.json",
    )
    report = coordinator.saga_run_ready(actor=operator, saga_id=saga.id)
    # then nothing was called; the node is refused and the saga waits for an operator
    assert downstream.requests == []
    assert Step.objects.filter(saga=saga).count() == 0
    node.refresh_from_db()
    assert node.status == NodeStatus.FAILED and node.error["code"] == "POLICY_DENIED"
    assert report.saga.status == SagaStatus.RECOVERY_REQUIRED


def test_approval_required_by_a_policy_tightened_after_planning_holds_the_node_until_approved(
    use_policy: Any, operator: Principal, approver: Principal, downstream: RecordingHTTPServer
):
    # given a node planned while the policy needed no approval
    use_policy({})
    register(http_contract("transfer", downstream.url))
    saga = coordinator.saga_begin(actor=operator)
    node = coordinator.node_plan(actor=operator, saga_id=saga.id, action="transfer", input={"amount": 9})
    # when the policy now requires an approval for transfers and the saga runs
    use_policy(
        {"rules": [{"id": "four-eyes", "effect": "require_approval", "match": {"actions": ["transfer"]}}]},
        name="four-eyes.json",
    )
    coordinator.saga_run_ready(actor=operator, saga_id=saga.id)
    # then nothing was called and the node waits for an approval bound to its input
    assert downstream.requests == []
    node.refresh_from_db()
    assert node.status == NodeStatus.WAITING_APPROVAL
    pending = node.approvals.get()
    assert pending.requested_by == "policy:four-eyes"
    # and once approved it runs, exactly once
    coordinator.node_approve(actor=approver, saga_id=saga.id, node_id=node.id)
    coordinator.saga_run_ready(actor=operator, saga_id=saga.id)
    node.refresh_from_db()
    assert node.status == NodeStatus.COMPLETED
    assert len(downstream.requests_to("/transfer")) == 1


def test_rollback_works_under_deny_all_with_override_evidence(
    use_policy: Any, operator: Principal, downstream: RecordingHTTPServer
):
    use_policy({})
    register(http_contract("charge", downstream.url))
    saga = coordinator.saga_begin(actor=operator)
    coordinator.saga_step_execute(actor=operator, saga_id=saga.id, action="charge", input={})
    use_policy({"default_effect": "deny"}, name="deny-all.json")
    with pytest.raises(SagaError):
        coordinator.saga_commit(actor=operator, saga_id=saga.id)
    rolled = coordinator.saga_rollback(actor=operator, saga_id=saga.id)
    assert rolled.status == SagaStatus.ROLLED_BACK
    assert len(downstream.requests_to("/charge/undo")) == 1
    assert AuditEvent.objects.filter(saga_id=saga.id, event_type="POLICY_SAFETY_OVERRIDE").exists()


def test_execute_denied_creates_no_step_and_approval_needed_points_to_plan(
    use_policy: Any, operator: Principal, downstream: RecordingHTTPServer
):
    use_policy({"rules": [{"id": "gate", "effect": "require_approval", "match": {"actions": ["charge"]}}]})
    register(http_contract("charge", downstream.url))
    saga = coordinator.saga_begin(actor=operator)
    with pytest.raises(SagaError) as refused:
        coordinator.saga_step_execute(actor=operator, saga_id=saga.id, action="charge", input={})
    assert "plan_saga_step" in refused.value.message
    assert Step.objects.filter(saga=saga).count() == 0 and downstream.requests == []


def test_run_request_above_the_parallelism_budget_is_refused(use_policy: Any, operator: Principal):
    use_policy({"budgets": {"max_parallel": 2}})
    saga = coordinator.saga_begin(actor=operator)
    with pytest.raises(SagaError) as refused:
        coordinator.saga_run_ready(actor=operator, saga_id=saga.id, max_parallel=4)
    assert "max_parallel" in refused.value.message


def test_no_input_value_appears_in_a_decision_event(
    use_policy: Any, operator: Principal, downstream: RecordingHTTPServer
):
    use_policy({})
    register(http_contract("charge", downstream.url))
    saga = coordinator.saga_begin(actor=operator)
    coordinator.node_plan(actor=operator, saga_id=saga.id, action="charge", input={"card": "4242-SECRET-CARD"})
    coordinator.saga_run_ready(actor=operator, saga_id=saga.id)
    dumped = json.dumps(_decisions(saga.id))
    assert _decisions(saga.id) and "4242-SECRET-CARD" not in dumped


def test_rego_mode_gates_like_the_json_example(settings: Any, operator: Principal, downstream: RecordingHTTPServer):
    settings.SAGA_POLICY_MODE = "rego"
    settings.SAGA_POLICY_FILE = str(Path(__file__).resolve().parents[2] / "examples" / "policy.rego")
    contract = http_contract("wire", downstream.url)
    contract["semantic"]["risk"] = "high"
    register(contract)
    saga = coordinator.saga_begin(actor=operator)
    node = coordinator.node_plan(actor=operator, saga_id=saga.id, action="wire", input={})
    assert node.status == NodeStatus.WAITING_APPROVAL
    decision = _decisions(saga.id)[-1]
    assert decision["backend"] == "rego" and decision["matched_rules"] == ["threshold:high"]
