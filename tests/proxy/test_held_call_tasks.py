"""A confirmed proxied call of a client that negotiates MCP tasks is answered at once with a durable task, which
ends when an operator decides (console or `semantic-saga approve`/`deny`): approved -> exactly the downstream's
result, the world changed once; denied -> the isError refusal, nothing sent; tasks/cancel withdraws the approval
(a later approve is refused). Tasks are their creator's (another tenant can neither get, list nor cancel one), a
task left by one proxy process is finished by the next, and a client that does not negotiate tasks still has its
request held open. The official mcp client in both eras (legacy: 2025-11-25 tasks; auto: 2026-07-28 extension);
the demo world over Streamable HTTP."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from django.db import connections
from mcp import Client
from mcp.shared.exceptions import MCPError

from governance.errors import ServiceError
from governance.identity.principal import Principal, local_principal
from sagas.models import McpTask, Node
from sagas.operations.invoke import invoke
from sagas.operations.table import OPERATIONS
from sagas.protocols.proxy.runtime import journaled
from tests.approvals import console_operator
from tests.distributed.workers import shared_database_url
from tests.proxy import task_agent as tasks
from tests.proxy.agent import MODES, text
from tests.proxy.harness import ROOT, HttpDownstream, ServedProxy, config_file, serve_proxy
from tests.proxy.terminal import at_terminal

pytestmark = pytest.mark.django_db(transaction=True)
BIN = Path(sys.executable).parent
WAIT_SECONDS = 60
TRANSFER = {"from_account": "acc-payroll", "to_account": "acc-vendor", "amount": 3}


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "DATABASE_URL": shared_database_url(), "SAGA_DEFAULT_TENANT": "acme", "NO_COLOR": "1"}
    return subprocess.run(
        [str(BIN / "semantic-saga"), *args], env=env, cwd=ROOT, capture_output=True, text=True, timeout=WAIT_SECONDS
    )


def _in_thread(work: Callable[[], Any]) -> Any:
    """ORM work off the event loop, in a thread that closes its connection (the test database is dropped at the
    end of the run, which an open connection would prevent)."""

    def run() -> Any:
        try:
            return work()
        finally:
            connections.close_all()

    return anyio.to_thread.run_sync(run)


def _held_node() -> Node:
    return Node.objects.get(key__startswith="proxy-call-")


async def _calls(client: Client) -> list[str]:
    return [call["tool"] for call in (await client.call_tool("get_call_log", {})).structured_content["calls"]]


def _connect(served: ServedProxy, mode: str) -> Any:
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    http = httpx2.AsyncClient(timeout=httpx2.Timeout(30.0, read=120.0))
    return http, Client(
        streamable_http_client(served.url, http_client=http), mode=mode, cache=None, extensions=[tasks.Tasks()]
    )


class Agent:
    """One task-negotiating client connection for the block."""

    def __init__(self, served: ServedProxy, mode: str) -> None:
        self.http, self.client = _connect(served, mode)

    async def __aenter__(self) -> Client:
        await self.http.__aenter__()
        return await self.client.__aenter__()

    async def __aexit__(self, *exc: Any) -> None:
        await self.client.__aexit__(*exc)
        await self.http.__aexit__(*exc)


@pytest.fixture
def proxy(tmp_path: Path, demo_http: HttpDownstream) -> Any:
    with serve_proxy(config_file(tmp_path, {"demo": {"url": demo_http.url}}), call_path=journaled) as served:
        yield served


@pytest.mark.parametrize("mode", MODES)
def test_a_held_call_is_a_task_an_operator_approves_in_theconsole_operator(proxy: ServedProxy, mode: str):
    console = console_operator("olga", "acme")

    async def scenario() -> tuple[dict[str, Any], dict[str, Any], Any, list[str]]:
        async with Agent(proxy, mode) as client:
            before = await _calls(client)
            created = await tasks.call_as_task(client, "transfer_funds", TRANSFER)
            waiting = await tasks.get_task(client, created["taskId"])
            node = await _in_thread(_held_node)
            decide = {"decision": "approve", "node": [str(node.id)]}
            assert (
                await _in_thread(lambda: console.post("/admin/sagas/saga/approvals/decide/", decide))
            ).status_code == 302
            answer = await tasks.task_result(client, created["taskId"])
            return created, waiting, answer, (await _calls(client))[len(before) :]

    created, waiting, answer, sent = anyio.run(scenario)

    assert created["status"] == waiting["status"] == ("working" if mode == "auto" else "input_required")
    assert "waiting for an operator to approve transfer_funds" in waiting["statusMessage"]
    assert not answer.is_error and "transfer_id" in answer.structured_content  # exactly the downstream's answer
    assert sent[:1] == ["transfer_funds"] and sent.count("transfer_funds") == 1  # the world changed once
    row = McpTask.objects.get(pk=created["taskId"])
    node = _held_node()
    assert (row.saga_id, row.node_id, row.status) == (str(node.saga_id), str(node.id), "completed")
    assert node.step.status == "COMPLETED" and "olga" in node.approvals.get().decided_by


def test_semantic_saga_approve_completes_the_task_and_tasks_get_inlines_the_result(proxy: ServedProxy):
    async def scenario() -> tuple[dict[str, Any], subprocess.CompletedProcess[str], dict[str, Any]]:
        async with Agent(proxy, "auto") as client:
            created = await tasks.call_as_task(client, "transfer_funds", TRANSFER)
            node = await _in_thread(_held_node)
            approved = await anyio.to_thread.run_sync(lambda: at_terminal("approve", str(node.id), "--by", "oscar"))
            return created, approved, await tasks.wait_until_ended(client, created["taskId"])

    _, approved, ended = anyio.run(scenario)

    assert approved.returncode == 0, approved.stderr
    assert ended["status"] == "completed" and "transfer_id" in ended["result"]["structuredContent"]
    assert _held_node().approvals.get().decided_by == "oscar"


@pytest.mark.parametrize("mode", MODES)
def test_a_denied_task_answers_the_refusal_and_nothing_is_sent(proxy: ServedProxy, mode: str):
    async def scenario() -> tuple[Any, list[str]]:
        async with Agent(proxy, mode) as client:
            before = await _calls(client)
            created = await tasks.call_as_task(client, "transfer_funds", TRANSFER)
            node = await _in_thread(_held_node)
            assert (
                await anyio.to_thread.run_sync(lambda: at_terminal("deny", str(node.id), "--by", "dora"))
            ).returncode == 0
            answer = await tasks.task_result(client, created["taskId"])
            return answer, (await _calls(client))[len(before) :]

    answer, sent = anyio.run(scenario)

    assert answer.is_error and "dora denied it" in text(answer) and "Do not retry" in text(answer)
    assert answer.meta["io.semantic-saga/proxy"]["class"] == "I"
    assert "transfer_funds" not in sent
    assert _held_node().step.status == "REFUSED"


@pytest.mark.parametrize("mode", MODES)
def test_cancel_withdraws_the_approval_and_a_later_approve_is_refused(
    proxy: ServedProxy, mode: str, operator: Principal
):
    async def scenario() -> tuple[dict[str, Any], dict[str, Any], Any]:
        async with Agent(proxy, mode) as client:
            created = await tasks.call_as_task(client, "transfer_funds", TRANSFER)
            await _in_thread(_held_node)
            cancelled = await tasks.cancel_task(client, created["taskId"])
            ended = await tasks.wait_until_ended(client, created["taskId"])
            # 2025-11-25's tasks/result gives a cancelled task's refusal; 2026-07-28 has no tasks/result
            answer = None if mode == "auto" else await tasks.task_result(client, created["taskId"])
            return cancelled, ended, answer

    cancelled, ended, answer = anyio.run(scenario)

    assert ended["status"] == "cancelled" and "cancelled its task" in ended["statusMessage"]
    # 2026-07-28 acknowledges a cancel with an empty result; 2025-11-25 answers the cancelled task
    assert cancelled.get("status") == (None if mode == "auto" else "cancelled")
    assert answer is None or (answer.is_error and "cancelled its task" in text(answer))
    node = _held_node()
    assert node.status == "REJECTED" and node.step.status == "REFUSED"
    assert node.approvals.get().decided_by == "system:proxy"
    with pytest.raises(ServiceError, match="not waiting for approval"):
        invoke(OPERATIONS["approve_saga_step"], operator, {"saga_id": str(node.saga_id), "node_id": str(node.id)})


def test_another_tenant_can_neither_get_list_nor_cancel_the_task(tmp_path: Path, demo_http: HttpDownstream):
    config = config_file(tmp_path, {"demo": {"url": demo_http.url}})
    globex = local_principal(protocol="test", tenant_id="globex")
    with (
        serve_proxy(config, call_path=journaled) as owner,
        serve_proxy(config, call_path=journaled, principal=globex) as other,
    ):

        async def scenario() -> tuple[list[str], list[dict[str, Any]], list[dict[str, Any]]]:
            async with Agent(owner, "legacy") as mine, Agent(other, "legacy") as theirs:
                created = await tasks.call_as_task(mine, "transfer_funds", TRANSFER)
                refusals = []
                for attempt in (tasks.get_task, tasks.cancel_task, tasks.task_result):
                    with pytest.raises(MCPError) as refused:
                        await attempt(theirs, created["taskId"])
                    refusals.append(refused.value.error.message)
                listed_there, listed_here = await tasks.list_tasks(theirs), await tasks.list_tasks(mine)
                await tasks.cancel_task(mine, created["taskId"])  # the owner ends it
                return refusals, listed_there, listed_here

        refusals, listed_there, listed_here = anyio.run(scenario)

    assert all("no task" in message for message in refusals), refusals
    assert listed_there == [] and [task["taskId"] for task in listed_here] == [McpTask.objects.get().id]


def test_a_task_left_by_a_stopped_proxy_is_finished_by_the_next(tmp_path: Path, demo_http: HttpDownstream):
    config = config_file(tmp_path, {"demo": {"url": demo_http.url}})

    async def create(served: ServedProxy) -> tuple[str, list[str]]:
        async with Agent(served, "legacy") as client:
            return (await tasks.call_as_task(client, "transfer_funds", TRANSFER))["taskId"], await _calls(client)

    with serve_proxy(config, call_path=journaled) as first:
        task_id, before = anyio.run(create, first)
    # the first proxy process is gone; the operator approves meanwhile
    assert at_terminal("approve", str(_held_node().id), "--by", "oscar").returncode == 0

    async def finish(served: ServedProxy) -> tuple[Any, list[str]]:
        async with Agent(served, "legacy") as client:
            return await tasks.task_result(client, task_id), await _calls(client)

    with serve_proxy(config, call_path=journaled) as second:
        answer, after = anyio.run(finish, second)

    assert not answer.is_error and "transfer_id" in answer.structured_content
    assert after[len(before) :].count("transfer_funds") == 1


def test_a_2025_task_asked_for_a_call_that_is_not_held_is_born_completed(proxy: ServedProxy):
    async def scenario() -> tuple[dict[str, Any], Any, list[dict[str, Any]]]:
        async with Agent(proxy, "legacy") as client:
            created = await tasks.call_as_task(client, "get_call_log", {})
            return created, await tasks.task_result(client, created["taskId"]), await tasks.list_tasks(client)

    created, answer, listed = anyio.run(scenario)

    assert created["status"] == "completed" and "calls" in answer.structured_content
    assert [task["taskId"] for task in listed] == [created["taskId"]]


def test_the_official_client_resolves_a_2026_task_by_itself(proxy: ServedProxy):
    def operator() -> None:
        node = _wait_for_node("WAITING_APPROVAL")
        assert at_terminal("approve", str(node.id)).returncode == 0

    async def scenario() -> Any:
        async with Agent(proxy, "auto") as client, anyio.create_task_group() as group:
            group.start_soon(anyio.to_thread.run_sync, lambda: (operator(), connections.close_all()))
            return await client.call_tool("transfer_funds", TRANSFER)  # polls tasks/get through the extension

    answer = anyio.run(scenario)

    assert not answer.is_error and "transfer_id" in answer.structured_content
    assert McpTask.objects.get().status == "completed"


def test_a_2026_request_without_the_extension_may_not_use_tasks(proxy: ServedProxy):
    async def scenario() -> MCPError:
        from tests.proxy.agent import connect

        async with connect(proxy.url, "auto") as client:
            with pytest.raises(MCPError) as refused:
                await tasks.get_task(client, "any")
            return refused.value

    refused = anyio.run(scenario)

    assert refused.error.code == -32021 and tasks.EXTENSION in refused.error.message


@pytest.mark.parametrize("mode", MODES)
def test_a_client_without_tasks_keeps_the_blocking_hold(proxy: ServedProxy, mode: str):
    seen: dict[str, Any] = {}

    def operator() -> None:
        seen["approve"] = at_terminal("approve", str(_wait_for_node("WAITING_APPROVAL").id))

    async def scenario() -> tuple[Any, Any, Any]:
        from tests.proxy.agent import connect

        async with connect(proxy.url, mode) as client:
            listed = {tool.name: tool for tool in (await client.list_tools()).tools}
            thread = threading.Thread(target=lambda: (operator(), connections.close_all()))
            thread.start()
            answer = await client.call_tool("transfer_funds", TRANSFER)
            await anyio.to_thread.run_sync(thread.join)
            return client.server_capabilities, listed, answer

    capabilities, listed, answer = anyio.run(scenario)

    if mode == "legacy":  # tasks are offered: capabilities.tasks, and a confirm-gated tool may be asked as one
        assert capabilities.tasks is not None and capabilities.tasks.requests.tools.call is not None
        assert listed["transfer_funds"].execution.task_support == "optional"
        assert listed["get_call_log"].execution is None
    else:  # the extension is offered; this client did not list it, so it gets no task
        assert tasks.EXTENSION in capabilities.extensions
    assert seen["approve"].returncode == 0 and not answer.is_error and "transfer_id" in answer.structured_content
    assert not McpTask.objects.exists()


def test_a_task_nobody_decides_times_out_as_denied(tmp_path: Path, demo_http: HttpDownstream):
    config = config_file(tmp_path, {"demo": {"url": demo_http.url}}, policy={"confirmTimeoutMs": 500})
    with serve_proxy(config, call_path=journaled) as served:

        async def scenario() -> tuple[Any, list[str]]:
            async with Agent(served, "legacy") as client:
                before = await _calls(client)
                created = await tasks.call_as_task(client, "transfer_funds", TRANSFER)
                return await tasks.task_result(client, created["taskId"]), (await _calls(client))[len(before) :]

        answer, sent = anyio.run(scenario)

    assert answer.is_error and "within the confirm timeout" in text(answer) and "transfer_funds" not in sent
    assert _held_node().approvals.get().status == "EXPIRED"


@pytest.mark.parametrize("mode", MODES)
def test_cancel_does_not_interrupt_a_call_already_sent(tmp_path: Path, mode: str):
    from tests.proxy.harness import TINY, stdio

    servers = {"tiny": stdio(TINY, "--journal-tools")}
    config = config_file(tmp_path, servers, policy={"tools": [{"tool": "hang", "action": "confirm"}]})
    with serve_proxy(config, call_path=journaled) as served:

        async def scenario() -> tuple[Any, dict[str, Any]]:
            async with Agent(served, mode) as client:
                created = await tasks.call_as_task(client, "hang", {"job": "backup"})
                node = await _in_thread(_held_node)
                assert (await anyio.to_thread.run_sync(lambda: at_terminal("approve", str(node.id)))).returncode == 0
                await _in_thread(lambda: _wait_for_node("EXECUTING"))  # released and sent: it never answers
                try:
                    refusal: Any = await tasks.cancel_task(client, created["taskId"])
                except MCPError as refused:
                    refusal = refused.error.message
                return refusal, await tasks.get_task(client, created["taskId"])

        refusal, task = anyio.run(scenario)

    assert task["status"] == "working" and "not interrupted" in task["statusMessage"]
    # the proxy stopped with the call in flight: its step is journaled uncertain, for the next process to say so
    assert _held_node().step.error["uncertain"] is True
    if mode == "legacy":  # a 2025-11-25 cancel answers the cancelled task, or an error saying why it is not
        assert "already approved and sent to tiny" in refusal
    else:  # the 2026-07-28 extension's cancel is cooperative: acknowledged, the task ends as it will
        assert refusal.get("status") is None


def _wait_for_node(status: str) -> Node:
    deadline = time.monotonic() + WAIT_SECONDS
    while (node := Node.objects.filter(key__startswith="proxy-call-", status=status).first()) is None:
        assert time.monotonic() < deadline, f"the held call never became {status}"
        time.sleep(0.1)
    return node
