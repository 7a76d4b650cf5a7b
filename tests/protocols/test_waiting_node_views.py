"""A waiting node over MCP and A2A carries what its approver judges, and still matches the advertised schemas.

In process: the MCP call goes through sagas.protocols.mcp.server.call_tool (validation, RBAC, handler, result shaping,
the structured content a client gets) and the A2A command through the operation table's run_command, both without
a transport; the transports themselves are covered by test_mcp_http.py and test_a2a_commands.py.
"""

from __future__ import annotations

import asyncio
from typing import Any

import jsonschema

from governance.identity.principal import Principal
from sagas.operations.table import OPERATIONS
from sagas.protocols.a2a import commands as a2a
from sagas.protocols.mcp import server as mcp
from tests.approvals import CHARGE_INPUT, LONG_NOTE, digest_of, plan_charge
from tests.httpserver import RecordingHTTPServer


def _mcp(principal: Principal, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    result = asyncio.run(mcp.call_tool(principal, tool, arguments))
    assert not result.is_error and result.structured_content is not None, result.content
    jsonschema.validate(result.structured_content, OPERATIONS[tool].output.schema)
    return result.structured_content


def test_get_saga_over_mcp_shows_the_waiting_nodes_approval_context(
    operator: Principal, downstream: RecordingHTTPServer
):
    # given a card charge waiting for approval
    saga, _node = plan_charge(operator, downstream, note=LONG_NOTE)
    # when an agent reads the saga
    node = _mcp(operator, "get_saga", {"saga_id": str(saga.id)})["workflow"]["nodes"][0]
    # then the node carries the input, the contract's facts, why approval is needed and the digest it binds to
    context = node["approval_context"]
    assert node["input"]["amount"] == 4200 and node["input"]["currency"] == "EUR"
    assert context["risk"] == "low" and context["reversibility"] == "compensable"
    assert context["compensation"] == f"POST {downstream.url}/refunds"
    assert context["required_by"] == "contract" and context["policy_rules"] == []
    assert context["input_digest"] == digest_of({**CHARGE_INPUT, "note": LONG_NOTE})
    folded = {p["field"]: p["folded"] for p in context["input_preview"]}
    assert folded == {"amount": False, "currency": False, "card": False, "note": True}


def test_timeline_over_mcp_keeps_the_input_out_but_names_the_digest(
    operator: Principal, downstream: RecordingHTTPServer
):
    saga, _node = plan_charge(operator, downstream)
    node = _mcp(operator, "get_saga_timeline", {"saga_id": str(saga.id)})["nodes"][0]
    assert "input" not in node and "input_preview" not in node["approval_context"]
    assert node["approval_context"]["input_digest"] == digest_of(CHARGE_INPUT)


def test_decided_node_has_no_approval_context_but_its_approval_names_the_digest(
    operator: Principal, approver: Principal, downstream: RecordingHTTPServer
):
    saga, node = plan_charge(operator, downstream)
    decided = _mcp(approver, "approve_saga_step", {"saga_id": str(saga.id), "node_id": str(node.id)})
    assert decided["approval_context"] is None
    assert decided["approval"]["status"] == "APPROVED"
    assert decided["approval"]["input_digest"] == digest_of(CHARGE_INPUT)


def test_a2a_get_answers_the_same_approval_context_as_mcp(operator: Principal, downstream: RecordingHTTPServer):
    # given a waiting charge
    saga, _node = plan_charge(operator, downstream)
    # when read as an A2A command and as an MCP tool call
    get = a2a.A2A_OPERATIONS["get"]
    over_a2a = a2a.run_command(get, operator, get.arguments.model_validate({"saga_id": str(saga.id)}))
    over_mcp = _mcp(operator, "get_saga", {"saga_id": str(saga.id)})
    # then both carry the same facts
    waiting = over_a2a["workflow"]["nodes"][0]["approval_context"]
    assert waiting == over_mcp["workflow"]["nodes"][0]["approval_context"]
    assert waiting["input_digest"] == digest_of(CHARGE_INPUT) and waiting["required_by"] == "contract"
