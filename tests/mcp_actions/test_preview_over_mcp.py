"""A preview of a saga over downstream MCP tools touches nothing downstream, and its promotion runs for real."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from audit.chain import verify_chain
from governance.identity.principal import Principal
from sagas import coordinator
from sagas.models import Node
from sagas.selectors import preview_report
from sagas.states import NodeStatus, SagaStatus
from tests.contracts import register
from tests.mcp_actions.conftest import DemoWorld, create_contact, http_server, mcp_contract


@pytest.fixture(autouse=True)
def _committed_db(transactional_db: None) -> None:
    """Executor threads run the promoted saga's steps: test rows must be committed."""


@pytest.fixture
def irreversible_needs_approval(tmp_path: Path, settings: Any) -> None:
    """Tenant policy: a person approves anything irreversible."""
    document = {
        "schema_version": 1,
        "revision": "preview-mcp",
        "default_effect": "allow",
        "tenants": {"acme": {"irreversible_requires_approval": True}},
    }
    (tmp_path / "policy.json").write_text(json.dumps(document))
    settings.SAGA_POLICY_MODE, settings.SAGA_POLICY_FILE = "json", str(tmp_path / "policy.json")


def _register(url: str) -> None:
    server = http_server(url)
    register(create_contact(server))
    email = {"tool": "send_email", "arguments": {"to": "${input.to}", "subject": "${input.subject}", "body": "Hi"}}
    correction = {"tool": "send_email", "arguments": {"to": "${input.to}", "subject": "Correction", "body": "Sorry"}}
    register(mcp_contract("send_email", server, email, compensation=correction, reversibility="compensable"))
    register(mcp_contract("transfer_funds", server, {"tool": "transfer_funds", "arguments": "${input}"}))


def _plan(actor: Principal, saga_id: object) -> None:
    plan = coordinator.node_plan
    plan(actor=actor, saga_id=saga_id, action="create_contact", key="contact", input={"name": "Ada", "email": "a@x"})
    plan(
        actor=actor,
        saga_id=saga_id,
        action="send_email",
        key="welcome",
        input={"to": "a@x", "subject": "Welcome"},
        depends_on=["contact"],
    )
    plan(
        actor=actor,
        saga_id=saga_id,
        action="transfer_funds",
        key="pay",
        input={"from_account": "acc-payroll", "to_account": "acc-vendor", "amount": 250},
        depends_on=["welcome"],
    )


def test_preview_touches_nothing_downstream_and_promotion_runs_for_real(
    operator: Principal, approver: Principal, crm: DemoWorld, irreversible_needs_approval: None
) -> None:
    _register(crm.url)
    world_before, calls_before = crm.state(), crm.calls()
    # when the saga is previewed end to end
    preview = coordinator.saga_begin(actor=operator, preview=True)
    _plan(operator, preview.id)
    coordinator.saga_run_ready(actor=operator, saga_id=preview.id, wait_seconds=0)
    # then the downstream world and its call log are exactly as they were
    assert crm.state() == world_before and crm.calls() == calls_before
    # and the dry steps are in a chain that verifies
    assert verify_chain(preview.id).valid
    report = preview_report(actor=operator, saga_id=preview.id)
    classes = {group["class"]: group["actions"] for group in report["classes"]}
    assert classes == {
        "irreversible": ["transfer_funds"],
        "compensable": ["send_email"],
        "reversible": ["create_contact"],
    }
    waiting = report["would_wait_for_approval"]
    assert [item["action"] for item in waiting] == ["transfer_funds"] and "policy" in waiting[0]["why"]
    transfer = next(item for item in report["items"] if item["action"] == "transfer_funds")
    assert transfer["request"]["forward"] == {
        "tool": "transfer_funds",
        "arguments": {"from_account": "acc-payroll", "to_account": "acc-vendor", "amount": 250},
        "timeout_seconds": 10,
    }

    # when promoted, every check runs again: the policy gates the transfer in the real saga too (its approval is
    # put to the approver once its dependencies completed)
    real = coordinator.saga_promote(actor=operator, saga_id=preview.id)
    nodes = {node.key: node for node in Node.objects.filter(saga=real)}
    assert nodes["pay"].status == NodeStatus.WAITING_DEPENDENCY and nodes["pay"].approval_required
    coordinator.saga_run_ready(actor=operator, saga_id=real.id, wait_seconds=30)
    assert crm.state()["accounts"] == world_before["accounts"]  # the transfer waits; contact and email ran
    nodes["pay"].refresh_from_db()
    assert nodes["pay"].status == NodeStatus.WAITING_APPROVAL
    coordinator.node_approve(actor=approver, saga_id=real.id, node_id="pay")
    coordinator.saga_run_ready(actor=operator, saga_id=real.id, wait_seconds=30)
    assert coordinator.saga_commit(actor=operator, saga_id=real.id).status == SagaStatus.COMMITTED
    assert [call["tool"] for call in crm.calls()[len(calls_before) :]] == [
        "create_contact",
        "send_email",
        "transfer_funds",
    ]
    assert crm.state()["accounts"]["acc-vendor"] == world_before["accounts"]["acc-vendor"] + 250
