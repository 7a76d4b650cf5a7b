"""What the conformance suites could not see, over the real transport (`semantic-saga serve` with the proxy at
/proxy/mcp in front of the demo world): tasks/get and tasks/cancel refuse an Mcp-Name naming another task (-32020,
both endpoints, 2026-07-28); /mcp declares taskSupport only on the tools whose work can wait and refuses a task from
the others (-32601, 2025-11-25, the official client); completion of the server's own prompt argument answers no
values; the proxy answers an unknown resource with -32602 (HTTP 400) in 2026-07-28; its logging/setLevel answers
what its server/discover declares."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import anyio
import httpx
import mcp.types as types
import pytest
from mcp.shared.exceptions import MCPError

from tests.protocols.conftest import ALICE, RunningServer, start_server
from tests.protocols.mcp_client import MODES
from tests.proxy import task_agent as tasks
from tests.proxy.agent import connect
from tests.proxy.harness import DEMO, TINY, config_file, stdio

MODERN = "2026-07-28"
TASKS_EXTENSION = "io.modelcontextprotocol/tasks"
HEADER_MISMATCH, METHOD_NOT_FOUND, INVALID_PARAMS = -32020, -32601, -32602


@pytest.fixture(autouse=True)
def _committed_db(transactional_db: None) -> None:
    """The server is another process: test rows must be committed."""


@pytest.fixture(scope="module")
def server(
    django_db_setup: None, django_db_blocker: object, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RunningServer]:
    workdir = tmp_path_factory.mktemp("leftovers")
    config = config_file(workdir, {"demo": stdio(DEMO), "tiny": stdio(TINY, prefix="tiny")})
    running = start_server(workdir, SAGA_PROXY_CONFIG=str(config))
    try:
        yield running
    finally:
        running.proc.terminate()
        running.proc.wait(timeout=30)


def _modern(url: str, method: str, params: dict[str, Any], **headers: str) -> httpx.Response:
    """One 2026-07-28 request as a client writes it by hand: the envelope in params._meta, the routing headers."""
    meta = {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientInfo": {"name": "leftovers", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {"extensions": {TASKS_EXTENSION: {}}},
    }
    request = {"jsonrpc": "2.0", "id": 1, "method": method, "params": {**params, "_meta": meta}}
    sent = {
        "Authorization": f"Bearer {ALICE}",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": MODERN,
        "Mcp-Method": method,
        **headers,
    }
    return httpx.post(url, json=request, headers=sent, timeout=60)


def _answer(response: httpx.Response) -> dict[str, Any]:
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        events = [json.loads(line[5:]) for line in response.text.splitlines() if line.startswith("data:")]
        return dict(events[-1])
    return dict(response.json())


def _a_task(server: RunningServer) -> str:
    """A real task of ALICE's on /mcp: a run of a saga with nothing to run, asked for as a task (2025-11-25: the
    client asks, so it gets one, born completed)."""

    async def scenario() -> str:
        async with connect(server.mcp_url, "legacy", token=ALICE) as client:
            saga = (await client.call_tool("begin_saga", {})).structured_content or {}
            created = await tasks.call_as_task(client, "run_ready_steps", {"saga_id": saga["id"]})
            return str(created["taskId"])

    return anyio.run(scenario)


@pytest.mark.parametrize("method", ["tasks/get", "tasks/update", "tasks/cancel"])
def test_a_tasks_request_whose_mcp_name_names_another_task_is_refused_on_mcp(server: RunningServer, method: str):
    task_id = _a_task(server)
    wrong = _modern(server.mcp_url, method, {"taskId": task_id}, **{"Mcp-Name": "wrong-task-id"})
    assert wrong.status_code == 400 and _answer(wrong)["error"]["code"] == HEADER_MISMATCH, wrong.text
    right = _modern(server.mcp_url, "tasks/get", {"taskId": task_id}, **{"Mcp-Name": task_id})
    assert right.status_code == 200 and _answer(right)["result"]["taskId"] == task_id, right.text


def test_a_tasks_request_whose_mcp_name_names_another_task_is_refused_on_the_proxy(server: RunningServer):
    url = f"{server.base}/proxy/mcp"
    wrong = _modern(url, "tasks/get", {"taskId": "task-a"}, **{"Mcp-Name": "task-b"})
    assert wrong.status_code == 400 and _answer(wrong)["error"]["code"] == HEADER_MISMATCH, wrong.text
    # the same request with a matching header reaches the lookup: that task does not exist
    unknown = _modern(url, "tasks/get", {"taskId": "task-a"}, **{"Mcp-Name": "task-a"})
    assert _answer(unknown)["error"]["code"] == INVALID_PARAMS, unknown.text


def test_only_the_tools_whose_work_can_wait_offer_tasks(server: RunningServer):
    async def scenario() -> dict[str, Any]:
        async with connect(server.mcp_url, "legacy", token=ALICE) as client:
            listed = await client.list_tools()
            return {tool.name: tool.execution for tool in listed.tools}

    offered = anyio.run(scenario)
    with_tasks = {name for name, execution in offered.items() if execution and execution.task_support == "optional"}
    assert with_tasks == {"run_ready_steps", "execute_saga_step", "rollback_saga", "trigger_rollback", "commit_saga"}


def test_a_task_asked_of_a_tool_without_task_support_is_refused_and_nothing_runs(server: RunningServer):
    async def scenario() -> tuple[MCPError, int]:
        async with connect(server.mcp_url, "legacy", token=ALICE) as client:
            before = len((await client.call_tool("list_sagas", {})).structured_content["sagas"])
            request = types.CallToolRequest(
                params=types.CallToolRequestParams(name="begin_saga", arguments={}, task=types.TaskMetadata(ttl=60000))
            )
            with pytest.raises(MCPError) as refused:
                await client.session.send_request(request, types.CallToolResult)
            after = len((await client.call_tool("list_sagas", {})).structured_content["sagas"])
            return refused.value, after - before

    refusal, begun = anyio.run(scenario)
    assert refusal.error.code == METHOD_NOT_FOUND and "does not support tasks" in refusal.error.message
    assert begun == 0


@pytest.mark.parametrize("mode", MODES)
def test_the_servers_own_prompt_argument_completes_with_no_values(server: RunningServer, mode: str):
    async def scenario() -> tuple[types.CompleteResult, MCPError]:
        async with connect(server.mcp_url, mode, token=ALICE) as client:
            prompt = types.PromptReference(type="ref/prompt", name="saga-coordinator")
            answer = await client.complete(prompt, {"name": "task", "value": "ch"})
            with pytest.raises(MCPError) as unknown:
                await client.complete(
                    types.PromptReference(type="ref/prompt", name="nope"), {"name": "task", "value": ""}
                )
            return answer, unknown.value

    answer, unknown = anyio.run(scenario)
    assert answer.completion.values == []
    assert unknown.error.code == INVALID_PARAMS and "Unknown prompt 'nope'" in unknown.error.message


def test_the_proxy_answers_an_unknown_resource_as_invalid_params_in_2026_07_28(server: RunningServer):
    uri = "demo://no-such-thing"
    answer = _modern(f"{server.base}/proxy/mcp", "resources/read", {"uri": uri}, **{"Mcp-Name": uri})
    assert answer.status_code == 400 and _answer(answer)["error"]["code"] == INVALID_PARAMS, answer.text
    legacy = _legacy_read(server, uri)
    assert legacy == -32002  # the 2025-11-25 code stays for handshake-era clients


def test_a_downstreams_own_not_found_reaches_a_2026_07_28_client_as_invalid_params(server: RunningServer):
    # the tiny server lists the template note://{name} and answers -32002 for note://missing
    uri = "tiny+note://missing"
    answer = _modern(f"{server.base}/proxy/mcp", "resources/read", {"uri": uri}, **{"Mcp-Name": uri})
    assert answer.status_code == 400 and _answer(answer)["error"]["code"] == INVALID_PARAMS, answer.text
    assert _legacy_read(server, uri) == -32002


def _legacy_read(server: RunningServer, uri: str) -> int:
    async def scenario() -> int:
        async with connect(f"{server.base}/proxy/mcp", "legacy", token=ALICE) as client:
            with pytest.raises(MCPError) as missing:
                await client.read_resource(uri)
            return missing.value.error.code

    return anyio.run(scenario)


@pytest.mark.parametrize("endpoint", ["/mcp", "/proxy/mcp"])
def test_logging_is_served_where_discover_declares_it(server: RunningServer, endpoint: str):
    url = server.base + endpoint
    discovered = _answer(_modern(url, "server/discover", {}))["result"]
    declared = "logging" in (discovered.get("capabilities") or {})
    answer = _answer(_modern(url, "logging/setLevel", {"level": "warning"}))
    if declared:
        assert "result" in answer, answer
    else:
        assert answer["error"]["code"] == METHOD_NOT_FOUND, answer
