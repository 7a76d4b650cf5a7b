"""Black-box MCP over Streamable HTTP: a real server process, the official client, both protocol eras."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest
from mcp.shared.exceptions import MCPError
from mcp.types import TextContent
from mcp_types.jsonrpc import INVALID_PARAMS

from sagas.models import Saga
from sagas.states import SagaStatus
from tests.contracts import http_contract, register
from tests.httpserver import RecordingHTTPServer
from tests.protocols.conftest import ALICE, MALLORY, VERA, RunningServer
from tests.protocols.mcp_client import MODES, call, connect, refused, unknown_tool


def run(coro: Any) -> Any:
    return asyncio.run(coro)


@pytest.mark.parametrize("mode", MODES)
def test_full_lifecycle_plan_approve_run_commit(server: RunningServer, downstream: RecordingHTTPServer, mode: str):
    # given two registered actions; charging needs a human's approval
    register(http_contract("charge_card", downstream.url, approval_required=True))
    register(http_contract("update_inventory", downstream.url))

    async def scenario() -> dict[str, Any]:
        async with connect(server.mcp_url, ALICE, mode) as client:
            tools = {t.name: t for t in (await client.list_tools()).tools}
            assert len(tools) == 21 and tools["get_saga"].annotations.read_only_hint
            assert tools["rollback_saga"].annotations.destructive_hint and tools["begin_saga"].output_schema
            saga = await call(client, "begin_saga", {"metadata": {"order": "42"}})
            sid = saga["id"]
            charge = await call(
                client,
                "plan_saga_step",
                {"saga_id": sid, "action": "charge_card", "input": {"amount": 5}, "key": "charge"},
            )
            assert charge["status"] == "WAITING_APPROVAL" and charge["approval"]["status"] == "PENDING"
            await call(
                client,
                "plan_saga_step",
                {
                    "saga_id": sid,
                    "action": "update_inventory",
                    "input": {"sku": "a"},
                    "key": "inventory",
                    "depends_on": ["charge"],
                },
            )
            await call(client, "checkpoint_saga", {"saga_id": sid, "name": "planned", "data": {"note": "ok"}})
            waiting = await call(client, "run_ready_steps", {"saga_id": sid})
            assert waiting["run"]["stopped_because"] == "waiting_approval"
            await call(client, "approve_saga_step", {"saga_id": sid, "node_id": "charge", "reason": "fine"})
            ran = await call(client, "run_ready_steps", {"saga_id": sid, "max_parallel": 2})
            assert ran["run"]["node_counts"] == {"COMPLETED": 2}
            committed = await call(client, "commit_saga", {"saga_id": sid})
            assert committed["status"] == "COMMITTED" and [s["action"] for s in committed["steps"]] == [
                "charge_card",
                "update_inventory",
            ]
            assert (await call(client, "verify_audit_chain", {"saga_id": sid}))["valid"]
            timeline = await call(client, "get_saga_timeline", {"saga_id": sid})
            assert "input" not in timeline["steps"][0] and timeline["integrity"]["valid"]
            return committed

    committed = run(scenario())
    assert Saga.objects.get(pk=committed["id"]).status == SagaStatus.COMMITTED
    assert [r[1] for r in downstream.requests] == ["/charge_card", "/update_inventory"]


def test_rollback_compensates_in_reverse_order_over_mcp(server: RunningServer, downstream: RecordingHTTPServer):
    for name in ("reserve", "charge", "ship"):
        register(http_contract(name, downstream.url))

    async def scenario() -> dict[str, Any]:
        async with connect(server.mcp_url, ALICE, "auto") as client:
            sid = (await call(client, "begin_saga", {}))["id"]
            for name in ("reserve", "charge", "ship"):
                step = await call(client, "execute_saga_step", {"saga_id": sid, "action": name, "input": {}})
                assert step["status"] == "COMPLETED" and step["saga_status"] == "ACTIVE"
            return await call(client, "rollback_saga", {"saga_id": sid})

    saga = run(scenario())
    assert saga["status"] == "ROLLED_BACK"
    assert [r[1] for r in downstream.requests if r[1].endswith("/undo")] == [
        "/ship/undo",
        "/charge/undo",
        "/reserve/undo",
    ]


@pytest.mark.parametrize(
    ("tool", "arguments", "problem"),
    [
        ("begin_saga", {"metadata": {}, "owner": "root"}, "owner: Extra inputs are not permitted"),
        ("begin_saga", {"metadata": "not an object"}, "metadata"),
        ("run_ready_steps", {"saga_id": "x", "max_parallel": "4"}, "max_parallel"),
        ("run_ready_steps", {"saga_id": "x", "max_parallel": 99}, "max_parallel"),
        ("plan_saga_step", {"saga_id": "x", "action": "a"}, "input: Field required"),
    ],
)
def test_strict_arguments_are_refused_and_nothing_is_created(
    server: RunningServer, tool: str, arguments: dict[str, Any], problem: str
):
    async def scenario() -> dict[str, Any]:
        async with connect(server.mcp_url, ALICE, "auto") as client:
            return await refused(client, tool, arguments)

    error = run(scenario())
    assert error["code"] == "INVALID_ARGUMENTS" and problem in error["message"]
    assert "Nothing was created or changed" in error["message"]
    assert Saga.objects.count() == 0


@pytest.mark.parametrize("mode", MODES)
def test_an_unknown_tool_is_a_protocol_error_naming_the_tools(server: RunningServer, mode: str):
    async def scenario() -> tuple[Any, list[str], dict[str, Any]]:
        async with connect(server.mcp_url, ALICE, mode) as client:
            error = await unknown_tool(client, "test_error_handling")
            names = [tool.name for tool in (await client.list_tools()).tools]
            return error, names, await call(client, "list_sagas", {})  # the session stays usable

    error, names, listed = run(scenario())
    assert "Unknown tool 'test_error_handling'" in error.message and "tools/list" in error.message
    assert all(name in error.message for name in names)
    assert error.data == {"tool": "test_error_handling", "available_tools": names}
    assert listed["sagas"] == [] and Saga.objects.count() == 0


def test_the_one_prompt_is_served_and_an_unknown_prompt_is_a_protocol_error(server: RunningServer):
    async def scenario() -> tuple[list[str], str, MCPError, MCPError]:
        async with connect(server.mcp_url, ALICE, "auto") as client:
            listed = [prompt.name for prompt in (await client.list_prompts()).prompts]
            prompt = await client.get_prompt("saga-coordinator", {"task": "refund order 42"})
            with pytest.raises(MCPError) as unknown:
                await client.get_prompt("test_simple_prompt")
            with pytest.raises(MCPError) as no_task:
                await client.get_prompt("saga-coordinator")
            text = prompt.messages[0].content
            assert isinstance(text, TextContent)
            return listed, text.text, unknown.value, no_task.value

    listed, text, unknown, no_task = run(scenario())
    assert listed == ["saga-coordinator"] and "Task: refund order 42" in text
    assert unknown.code == no_task.code == INVALID_PARAMS
    assert "'test_simple_prompt'" in unknown.message and "'saga-coordinator'" in unknown.message
    assert "'task'" in no_task.message


def test_viewer_reads_but_cannot_commit(server: RunningServer):
    async def scenario() -> tuple[dict[str, Any], dict[str, Any]]:
        async with connect(server.mcp_url, ALICE, "auto") as alice:
            sid = (await call(alice, "begin_saga", {}))["id"]
        async with connect(server.mcp_url, VERA, "legacy") as vera:
            seen = await call(vera, "get_saga", {"saga_id": sid})
            return seen, await refused(vera, "commit_saga", {"saga_id": sid})

    seen, error = run(scenario())
    assert seen["status"] == "ACTIVE"
    assert error["code"] == "FORBIDDEN" and "execute" in error["message"]
    assert Saga.objects.get(pk=seen["id"]).status == SagaStatus.ACTIVE


def test_another_tenants_saga_answers_saga_not_found(server: RunningServer):
    async def scenario() -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
        async with connect(server.mcp_url, ALICE, "auto") as alice:
            sid = (await call(alice, "begin_saga", {}))["id"]
        async with connect(server.mcp_url, MALLORY, "auto") as mallory:
            hidden = await refused(mallory, "get_saga", {"saga_id": sid})
            missing = await refused(mallory, "get_saga", {"saga_id": "00000000-0000-0000-0000-000000000000"})
            listed = await call(mallory, "list_sagas", {})
            return hidden, missing, listed

    hidden, missing, listed = run(scenario())
    assert hidden["code"] == missing["code"] == "SAGA_NOT_FOUND"
    assert "Saga not found" in hidden["message"] and listed["sagas"] == []


def test_a_new_connection_reads_a_saga_created_on_another(server: RunningServer):
    async def scenario() -> tuple[str, dict[str, Any]]:
        async with connect(server.mcp_url, ALICE, "legacy") as first:
            sid = (await call(first, "begin_saga", {"metadata": {"from": "first"}}))["id"]
        async with connect(server.mcp_url, ALICE, "auto") as second:
            return sid, await call(second, "get_saga", {"saga_id": sid})

    sid, saga = run(scenario())
    assert saga["id"] == sid and saga["metadata"]["from"] == "first"
    assert saga["metadata"]["_identity"] == {
        "principal_id": "alice",
        "tenant_id": "acme",
        "principal_type": "user",
        "protocol": "mcp",
        "roles": ["operator"],
        "identity_source": "oauth-access-token",
    }


INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}},
}
MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


def test_missing_or_bad_token_gets_401_with_a_challenge(server: RunningServer):
    for headers in ({}, {"Authorization": "Bearer not-a-real-token-000"}):
        answer = httpx.post(server.mcp_url, json=INITIALIZE, headers={**MCP_HEADERS, **headers}, timeout=10)
        assert answer.status_code == 401
        assert answer.headers["www-authenticate"].startswith("Bearer error=")
        assert answer.json()["error"] in ("invalid_token", "invalid_request")


def test_foreign_host_and_origin_are_refused(server: RunningServer):
    auth = {**MCP_HEADERS, "Authorization": f"Bearer {ALICE}"}
    foreign_host = httpx.post(server.mcp_url, json=INITIALIZE, headers={**auth, "Host": "evil.example"}, timeout=10)
    assert foreign_host.status_code in (400, 421)
    foreign_origin = httpx.post(
        server.mcp_url, json=INITIALIZE, headers={**auth, "Origin": "http://evil.example"}, timeout=10
    )
    assert foreign_origin.status_code == 403
    ok = httpx.post(server.mcp_url, json=INITIALIZE, headers=auth, timeout=10)
    assert ok.status_code == 200 and "mcp-session-id" in ok.headers
    assert json.loads(ok.text.split("data: ", 1)[1].splitlines()[0])["result"]["serverInfo"]["name"] == "semantic-saga"
