"""sagas.selectors.approvals: why each approval was required, what undoing the action takes, and the digest it binds."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from governance.identity.principal import Principal
from sagas import coordinator
from sagas.models import Approval, Node
from sagas.selectors.approvals import approval_context
from sagas.states import ApprovalStatus, NodeStatus
from tests.approvals import CHARGE_INPUT, digest_of, plan_charge
from tests.contracts import http_contract, register
from tests.httpserver import RecordingHTTPServer


def _pending(node: Node) -> Approval:
    return Approval.objects.select_related("node").get(node=node, status=ApprovalStatus.PENDING)


def test_a_policy_gate_names_its_rule(
    tmp_path: Path, settings: Any, operator: Principal, downstream: RecordingHTTPServer
):
    # given a tenant policy that wants approval for anything high-risk
    tenant = {"approval_at_or_above_risk": "high"}
    document = {"schema_version": 1, "revision": "r1", "default_effect": "allow", "tenants": {"acme": tenant}}
    (tmp_path / "policy.json").write_text(json.dumps(document))
    settings.SAGA_POLICY_MODE, settings.SAGA_POLICY_FILE = "json", str(tmp_path / "policy.json")
    contract = http_contract("wire", downstream.url)
    contract["semantic"]["risk"] = "high"
    register(contract)
    saga = coordinator.saga_begin(actor=operator)
    # when a node is planned
    node = coordinator.node_plan(actor=operator, saga_id=saga.id, action="wire", input={"amount": 10})
    # then its approval context names the policy rule that required it
    context = approval_context(_pending(node))
    assert (context.required_by, context.policy_rules) == ("policy", ("threshold:high",))
    assert context.required_because == "tenant policy requires approval (rule threshold:high)"
    assert context.risk == "high"


def test_a_caller_gate_says_the_planner_asked(operator: Principal, downstream: RecordingHTTPServer):
    register(http_contract("notify", downstream.url))
    saga = coordinator.saga_begin(actor=operator)
    node = coordinator.node_plan(actor=operator, saga_id=saga.id, action="notify", input={}, approval_required=True)
    context = approval_context(_pending(node))
    assert context.required_by == "caller" and "approval_required=true" in context.required_because
    assert context.fields == ()


def test_a_request_after_a_retry_keeps_the_first_reason(
    operator: Principal, approver: Principal, downstream: RecordingHTTPServer
):
    # given a charge whose approval was rejected, then retried (a fresh request, stored as "retry")
    saga, node = plan_charge(operator, downstream)
    coordinator.node_approve(actor=approver, saga_id=saga.id, node_id=node.id, approved=False, reason="call first")
    coordinator.node_retry(actor=operator, saga_id=saga.id, node_id=node.id)
    pending = _pending(node)
    assert pending.requested_by == "retry"
    # then the new request still says the contract requires it, and that it was asked again
    context = approval_context(pending)
    assert context.required_by == "contract"
    assert context.required_because == (
        "the contract charge@1.0.0 requires approval (execution_policy.approval_required); requested again because "
        "the node was retried"
    )


def test_an_irreversible_action_says_there_is_no_undo(operator: Principal, downstream: RecordingHTTPServer):
    register(http_contract("email", downstream.url, reversibility="irreversible", approval_required=True))
    saga = coordinator.saga_begin(actor=operator)
    node = coordinator.node_plan(actor=operator, saga_id=saga.id, action="email", input={"to": "a@example.com"})
    context = approval_context(_pending(node))
    assert (context.reversibility, context.compensation, context.consequence) == (
        "irreversible",
        None,
        "irreversible — no undo",
    )


def test_the_shown_digest_is_the_one_the_coordinator_enforces(
    operator: Principal, approver: Principal, downstream: RecordingHTTPServer
):
    # given a waiting charge whose stored input is then changed behind the coordinator's back
    saga, node = plan_charge(operator, downstream)
    assert approval_context(_pending(node)).input_digest == digest_of(CHARGE_INPUT)
    Node.objects.filter(pk=node.pk).update(input={**CHARGE_INPUT, "amount": 999999})
    # then the context says the approval no longer matches the input
    assert approval_context(_pending(node)).digest_current is False
    # and approving it lets nothing run: the coordinator compares the same digest
    coordinator.node_approve(actor=approver, saga_id=saga.id, node_id=node.id)
    coordinator.saga_run_ready(actor=operator, saga_id=saga.id, wait_seconds=30)
    failed = Node.objects.get(pk=node.pk)
    assert failed.status == NodeStatus.FAILED and failed.error["code"] == "APPROVAL_NOT_BINDING"
    assert downstream.requests == []
