from __future__ import annotations

import json

import pytest

from audit.models import AuditEvent
from governance.errors import Forbidden
from governance.identity.principal import Principal
from sagas import coordinator
from sagas.errors import SagaError
from sagas.models import Approval, Node
from sagas.states import ApprovalStatus, NodeStatus, SagaStatus
from tests.contracts import http_contract, register
from tests.httpserver import RecordingHTTPServer


def test_gated_node_waits_for_approval_then_runs(
    operator: Principal, approver: Principal, downstream: RecordingHTTPServer
):
    # given a contract that requires approval
    register(http_contract("wire", downstream.url, approval_required=True))
    saga = coordinator.saga_begin(actor=operator)
    node = coordinator.node_plan(actor=operator, saga_id=saga.id, action="wire", input={"amount": 10})
    assert node.status == NodeStatus.WAITING_APPROVAL
    # when run before approval, nothing is called
    report = coordinator.saga_run_ready(actor=operator, saga_id=saga.id)
    assert report.steps_started == 0 and downstream.requests == []
    # when approved
    coordinator.node_approve(actor=approver, saga_id=saga.id, node_id=node.id, reason="looks fine")
    coordinator.saga_run_ready(actor=operator, saga_id=saga.id)
    # then it ran, and the approval records who decided
    node.refresh_from_db()
    assert node.status == NodeStatus.COMPLETED
    approval = Approval.objects.get(node=node)
    assert approval.status == ApprovalStatus.APPROVED and approval.decided_by == "bob"


def test_caller_cannot_waive_a_contract_gate(operator: Principal, downstream: RecordingHTTPServer):
    register(http_contract("wire", downstream.url, approval_required=True))
    saga = coordinator.saga_begin(actor=operator)
    node = coordinator.node_plan(actor=operator, saga_id=saga.id, action="wire", input={}, approval_required=False)
    assert node.approval_required is True and node.status == NodeStatus.WAITING_APPROVAL


def test_rejection_blocks_dependants_and_asks_for_recovery(
    operator: Principal, approver: Principal, downstream: RecordingHTTPServer
):
    # given a gated node with a dependant
    register(http_contract("wire", downstream.url))
    register(http_contract("notify", downstream.url))
    saga = coordinator.saga_begin(actor=operator)
    gate = coordinator.node_plan(actor=operator, saga_id=saga.id, action="wire", input={}, approval_required=True)
    coordinator.node_plan(actor=operator, saga_id=saga.id, action="notify", input={}, depends_on=[str(gate.id)])
    # when rejected, with a reason that must stay out of the audit chain
    coordinator.node_approve(actor=approver, saga_id=saga.id, node_id=gate.id, approved=False, reason="SECRET-REASON")
    # then
    saga.refresh_from_db()
    assert saga.status == SagaStatus.RECOVERY_REQUIRED
    assert saga.error["code"] == "APPROVAL_REJECTED"
    assert sorted(Node.objects.filter(saga=saga).values_list("status", flat=True)) == [
        NodeStatus.BLOCKED,
        NodeStatus.REJECTED,
    ]
    assert all("SECRET-REASON" not in json.dumps(e.data) for e in AuditEvent.objects.all())
    # and a retry asks for approval again and resumes the saga
    node = coordinator.node_retry(actor=operator, saga_id=saga.id, node_id=gate.id)
    assert node.status == NodeStatus.WAITING_APPROVAL
    saga.refresh_from_db()
    assert saga.status == SagaStatus.ACTIVE
    assert Approval.objects.filter(node=gate, status=ApprovalStatus.PENDING).count() == 1


def test_approving_a_node_that_is_not_waiting_is_refused(operator: Principal, downstream: RecordingHTTPServer):
    register(http_contract("step", downstream.url))
    saga = coordinator.saga_begin(actor=operator)
    node = coordinator.node_plan(actor=operator, saga_id=saga.id, action="step", input={})
    with pytest.raises(SagaError) as refused:
        coordinator.node_approve(actor=operator, saga_id=saga.id, node_id=node.id)
    assert refused.value.code == "NODE_NOT_WAITING_APPROVAL"


def test_expired_approval_request_counts_as_rejected(
    operator: Principal, approver: Principal, downstream: RecordingHTTPServer, settings: object
):
    # given approval requests that expire at once
    settings.SAGA_APPROVAL_TTL_SECONDS = 1  # type: ignore[attr-defined]
    register(http_contract("wire", downstream.url, approval_required=True))
    saga = coordinator.saga_begin(actor=operator)
    node = coordinator.node_plan(actor=operator, saga_id=saga.id, action="wire", input={})
    Approval.objects.filter(node=node).update(expires_at="2000-01-01T00:00:00Z")  # the deadline passed
    # when someone approves too late
    with pytest.raises(SagaError) as refused:
        coordinator.node_approve(actor=approver, saga_id=saga.id, node_id=node.id)
    # then nothing runs: the node is rejected, the saga waits, and a retry asks again
    assert refused.value.code == "APPROVAL_EXPIRED"
    node.refresh_from_db()
    assert node.status == NodeStatus.REJECTED and node.error["code"] == "APPROVAL_EXPIRED"
    assert Approval.objects.get(node=node).status == ApprovalStatus.EXPIRED
    saga.refresh_from_db()
    assert saga.status == SagaStatus.RECOVERY_REQUIRED
    coordinator.node_retry(actor=operator, saga_id=saga.id, node_id=node.id)
    assert Approval.objects.filter(node=node, status=ApprovalStatus.PENDING).get().expires_at is not None


def test_separation_of_duties_keeps_the_planner_from_approving(
    operator: Principal, approver: Principal, downstream: RecordingHTTPServer, settings: object
):
    settings.SAGA_APPROVAL_SEPARATION_OF_DUTIES = True  # type: ignore[attr-defined]
    register(http_contract("wire", downstream.url, approval_required=True))
    saga = coordinator.saga_begin(actor=operator)
    node = coordinator.node_plan(actor=operator, saga_id=saga.id, action="wire", input={})
    with pytest.raises(Forbidden) as refused:
        coordinator.node_approve(actor=operator, saga_id=saga.id, node_id=node.id)
    assert refused.value.code == "SEPARATION_OF_DUTIES" and "another operator" in refused.value.message
    assert coordinator.node_approve(actor=approver, saga_id=saga.id, node_id=node.id).status == NodeStatus.READY


def test_an_approval_binds_the_planned_input(operator: Principal, approver: Principal, downstream: RecordingHTTPServer):
    # given an approved node whose stored input is changed behind the coordinator's back
    register(http_contract("wire", downstream.url, approval_required=True))
    saga = coordinator.saga_begin(actor=operator)
    node = coordinator.node_plan(actor=operator, saga_id=saga.id, action="wire", input={"amount": "10"})
    coordinator.node_approve(actor=approver, saga_id=saga.id, node_id=node.id)
    Node.objects.filter(pk=node.pk).update(input={"amount": "10000"})
    # when it runs, the approval no longer matches what would be sent: nothing runs
    coordinator.saga_run_ready(actor=operator, saga_id=saga.id)
    node.refresh_from_db()
    assert downstream.requests == [] and node.error["code"] == "APPROVAL_NOT_BINDING"
