"""Sagas whose steps are downstream MCP tool calls, through the coordinator: rollback runs the downstream
compensation tools with the step's idempotency key, and a captured pre-state lets an update be undone."""

from __future__ import annotations

import json
from typing import Any

import pytest

from audit.canonical import sha256_hex
from governance.identity.principal import Principal
from sagas import coordinator
from sagas.models import Node, Step
from sagas.states import NodeStatus, SagaStatus, StepStatus
from tests.contracts import register
from tests.mcp_actions.conftest import DemoWorld, create_contact, http_server, mcp_contract


@pytest.fixture(autouse=True)
def _committed_db(transactional_db: None) -> None:
    """Executor threads run the steps: test rows must be committed."""


def _register_welcome_flow(url: str) -> None:
    server = http_server(url)
    register(create_contact(server))
    register(
        mcp_contract(
            "send_email",
            server,
            {"tool": "send_email", "arguments": {"to": "${input.to}", "subject": "${input.subject}", "body": "Hi"}},
            # An email cannot be unsent; the compensation is a correcting message.
            compensation={
                "tool": "send_email",
                "arguments": {"to": "${input.to}", "subject": "Correction", "body": "Please disregard our message."},
            },
            reversibility="compensable",
        )
    )
    register(mcp_contract("transfer_funds", server, {"tool": "transfer_funds", "arguments": "${input}"}))


def _steps(saga_id: Any) -> dict[str, Step]:
    return {node.key: node.step for node in Node.objects.filter(saga_id=saga_id).select_related("step")}


def test_failed_transfer_rolls_back_through_the_downstream_tools(operator: Principal, crm: DemoWorld):
    # given contact -> welcome email -> transfer, where the transfer exceeds the balance (isError)
    _register_welcome_flow(crm.url)
    saga = coordinator.saga_begin(actor=operator, metadata={"flow": "onboard"})
    plan = coordinator.node_plan
    plan(actor=operator, saga_id=saga.id, action="create_contact", key="contact", input={"name": "Ada", "email": "a@x"})
    plan(
        actor=operator,
        saga_id=saga.id,
        action="send_email",
        key="welcome",
        input={"to": "a@x", "subject": "Welcome"},
        depends_on=["contact"],
    )
    plan(
        actor=operator,
        saga_id=saga.id,
        action="transfer_funds",
        key="pay",
        input={"from_account": "acc-payroll", "to_account": "acc-vendor", "amount": 10**9},
        depends_on=["welcome"],
    )
    # when the saga runs
    report = coordinator.saga_run_ready(actor=operator, saga_id=saga.id)
    # then the transfer failed once (not retried), and the saga unwound newest first
    saga.refresh_from_db()
    assert saga.status == SagaStatus.ROLLED_BACK, (report.as_dict(), saga.error)
    steps = _steps(saga.id)
    assert steps["pay"].status == StepStatus.FAILED and steps["pay"].error["code"] == "MCP_TOOL_ERROR"
    assert crm.keys("transfer_funds") == [str(steps["pay"].id)]
    assert {steps[key].status for key in ("contact", "welcome")} == {StepStatus.COMPENSATED}
    # and the contact was deleted by the downstream delete tool, with the step's rollback key and the created id
    contact = steps["contact"].result["result"]
    assert crm.calls("delete_contact") == [
        {
            "tool": "delete_contact",
            "arguments": {"id": contact["id"]},
            "idempotency_key": f"{steps['contact'].id}:rollback",
            "outcome": "ok",
        }
    ]
    assert crm.keys("create_contact") == [str(steps["contact"].id)]
    undone = steps["contact"].compensation_result
    assert (undone["tool"], undone["result"], undone["result_from"]) == (
        "delete_contact",
        {"id": "c-1", "deleted": True},
        "structuredContent",
    )
    # and compensation ran newest first: the correcting email, then the delete
    assert [(call["tool"], call["idempotency_key"]) for call in crm.calls() if call["tool"] != "create_contact"] == [
        ("send_email", str(steps["welcome"].id)),
        ("transfer_funds", str(steps["pay"].id)),
        ("send_email", f"{steps['welcome'].id}:rollback"),
        ("delete_contact", f"{steps['contact'].id}:rollback"),
    ]
    world = crm.state()
    assert world["contacts"] == {}
    assert [mail["subject"] for mail in world["outbox"]] == ["Welcome", "Correction"]
    assert world["accounts"] == {"acc-payroll": 100_000, "acc-vendor": 0}


def test_captured_pre_state_lets_rollback_restore_the_prior_value(operator: Principal, crm: DemoWorld):
    # given an existing contact and a rename action that captures the contact before updating it
    before = crm.call_tool("create_contact", {"name": "Ada Lovelace", "email": "ada@example.com"})
    register(
        mcp_contract(
            "rename_contact",
            http_server(crm.url),
            {"tool": "update_contact", "arguments": {"id": "${input.id}", "name": "${input.name}"}},
            capture={"tool": "get_contact", "arguments": {"id": "${input.id}"}},
            compensation={
                "tool": "update_contact",
                "arguments": {"id": "${input.id}", "name": "${pre_state.name}", "email": "${pre_state.email}"},
            },
            reversibility="reversible",
            idempotent=True,
        )
    )
    saga = coordinator.saga_begin(actor=operator)
    node = coordinator.node_plan(
        actor=operator, saga_id=saga.id, action="rename_contact", input={"id": before["id"], "name": "Ada King"}
    )
    # when the rename runs
    report = coordinator.saga_run_ready(actor=operator, saga_id=saga.id)
    # then the step's stored result holds the answer and the hashed pre-state
    assert report.count(NodeStatus.COMPLETED) == 1, report.as_dict()
    step = Step.objects.get(node_id=node.id)
    kept = {key: step.result[key] for key in ("tool", "result", "result_from", "pre_state", "pre_state_sha256")}
    assert kept == {
        "tool": "update_contact",
        "result": {**before, "name": "Ada King"},
        "result_from": "structuredContent",
        "pre_state": before,
        "pre_state_sha256": sha256_hex(before),
    }
    assert json.loads(step.result["content"][0]["text"]) == kept["result"]  # the answer as the caller got it
    assert crm.state()["contacts"][before["id"]]["name"] == "Ada King"
    # when the saga is rolled back
    saga = coordinator.saga_rollback(actor=operator, saga_id=saga.id)
    # then the inverse update restored the captured value, keyed with the step's rollback key
    assert saga.status == SagaStatus.ROLLED_BACK
    assert crm.state()["contacts"][before["id"]] == before
    assert [(call["tool"], call["idempotency_key"]) for call in crm.calls()[1:]] == [
        ("get_contact", f"{step.id}:capture"),
        ("update_contact", str(step.id)),
        ("update_contact", f"{step.id}:rollback"),
    ]
    assert crm.calls("update_contact")[1]["arguments"] == {
        "id": before["id"],
        **{k: before[k] for k in ("name", "email")},
    }
