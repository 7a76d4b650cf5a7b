"""A confirmed proxied call is held while the agent's request stays open, in the same approval queue operators
already use: decided in the console, with `semantic-saga approve`/`deny` (subprocesses), or cancelled by the client
disconnecting; another tenant neither sees nor decides it. Demo world over Streamable HTTP, the official mcp client
as the agent."""

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

from governance.errors import ServiceError
from governance.identity.principal import Principal
from sagas.models import Node
from sagas.operations.invoke import invoke
from sagas.operations.table import OPERATIONS
from sagas.protocols.proxy.runtime import journaled
from sagas.selectors import approvals_pending, saga_get
from tests.approvals import console_operator, text_of
from tests.distributed.workers import shared_database_url
from tests.proxy.agent import connect, text
from tests.proxy.harness import ROOT, HttpDownstream, config_file, serve_proxy
from tests.proxy.terminal import at_terminal

pytestmark = pytest.mark.django_db(transaction=True)
BIN = Path(sys.executable).parent
WAIT_SECONDS = 60
TRANSFER = {"from_account": "acc-payroll", "to_account": "acc-vendor", "amount": 3}


def _held(status: str = "WAITING_APPROVAL") -> Node | None:
    return Node.objects.filter(key__startswith="proxy-call-", status=status).first()


def _wait_for(find: Callable[[], Any], what: str) -> Any:
    deadline = time.monotonic() + WAIT_SECONDS
    while (found := find()) is None or found is False:
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)
    return found


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "DATABASE_URL": shared_database_url(), "SAGA_DEFAULT_TENANT": "acme", "NO_COLOR": "1"}
    return subprocess.run(
        [str(BIN / "semantic-saga"), *args], env=env, cwd=ROOT, capture_output=True, text=True, timeout=WAIT_SECONDS
    )


def _closing_connections(work: Callable[[], None]) -> Callable[[], None]:
    """`work` for a thread of its own, which closes its database connection when done (the test database is
    dropped at the end of the run, which an open connection would prevent)."""

    def run() -> None:
        try:
            work()
        finally:
            connections.close_all()

    return run


def _transfer_while(tmp_path: Path, demo_http: HttpDownstream, operator: Callable[[], None]) -> tuple[Any, list[str]]:
    """The agent calls transfer_funds (I: confirm by default) while `operator` runs in a thread; returns its answer
    and the tools the world saw called meanwhile."""
    config = config_file(tmp_path, {"demo": {"url": demo_http.url}})
    with serve_proxy(config, call_path=journaled) as served:
        thread = threading.Thread(target=_closing_connections(operator))
        thread.start()

        async def scenario() -> tuple[Any, list[str]]:
            async with connect(served.url, "legacy") as client:
                before = (await client.call_tool("get_call_log", {})).structured_content["calls"]
                answer = await client.call_tool("transfer_funds", TRANSFER)
                after = (await client.call_tool("get_call_log", {})).structured_content["calls"]
                return answer, [call["tool"] for call in after[len(before) :]]

        try:
            return anyio.run(scenario)
        finally:
            thread.join(timeout=WAIT_SECONDS)


def test_pending_lists_the_held_call_and_approve_releases_it(tmp_path: Path, demo_http: HttpDownstream):
    seen: dict[str, Any] = {}

    def operator() -> None:
        node = _wait_for(_held, "the call to be held")
        seen["pending"] = _cli("pending")
        seen["approve"] = at_terminal("approve", str(node.id), "--by", "oscar")

    answer, sent = _transfer_while(tmp_path, demo_http, operator)

    line = next(line for line in seen["pending"].stdout.splitlines() if "transfer_funds" in line)
    node = Node.objects.get(key__startswith="proxy-call-")
    assert line.startswith(str(node.id)[-8:]) and "demo" in line and " I " in line and '"amount":3' in line
    assert seen["approve"].returncode == 0, seen["approve"].stderr
    assert not answer.is_error and "transfer_id" in answer.structured_content  # exactly the downstream's answer
    assert sent == ["transfer_funds"]
    assert node.approvals.get().decided_by == "oscar" and node.step.status == "COMPLETED"


def test_deny_answers_the_agent_and_nothing_is_forwarded(tmp_path: Path, demo_http: HttpDownstream):
    def operator() -> None:
        node = _wait_for(_held, "the call to be held")
        assert at_terminal("deny", str(node.id), "--by", "dora").returncode == 0

    answer, sent = _transfer_while(tmp_path, demo_http, operator)

    assert answer.is_error and "dora denied it" in text(answer) and "Do not retry" in text(answer)
    assert answer.meta["io.semantic-saga/proxy"]["class"] == "I"
    assert sent == []
    node = Node.objects.get(key__startswith="proxy-call-")
    assert node.status == "REJECTED" and node.step.status == "REFUSED"
    assert node.saga.status == "ACTIVE"  # a denied call does not stop the session


def test_an_operator_approves_the_held_call_in_the_console(tmp_path: Path, demo_http: HttpDownstream):
    console = console_operator("olga", "acme")
    seen: dict[str, Any] = {}

    def operator() -> None:
        node = _wait_for(_held, "the call to be held")
        seen["queue"] = console.get("/admin/sagas/saga/approvals/").content.decode()
        decide = {"decision": "approve", "node": [str(node.id)]}
        seen["decided"] = console.post("/admin/sagas/saga/approvals/decide/", decide).status_code

    answer, sent = _transfer_while(tmp_path, demo_http, operator)

    assert seen["decided"] == 302
    # the approver reads what the proxy decided, in its terms: the tool on its server, the class, its source and the
    # gate, and what class I means
    queue = text_of(seen["queue"])
    assert "transfer_funds on demo held by the MCP proxy" in queue and "proxy.demo.transfer_funds" not in queue
    assert "the MCP proxy holds this call of transfer_funds on demo for confirmation: class I" in queue
    assert "irreversible — no way back" in queue and "What undo could do: no way back: I" in queue
    assert not answer.is_error and sent == ["transfer_funds"]


def test_a_client_that_disconnects_cancels_its_held_call(
    tmp_path: Path, demo_http: HttpDownstream, operator: Principal
):
    config = config_file(tmp_path, {"demo": {"url": demo_http.url}})
    with serve_proxy(config, call_path=journaled) as served:

        async def scenario() -> None:
            async with connect(served.url, "legacy") as client, anyio.create_task_group() as group:
                group.start_soon(client.call_tool, "transfer_funds", TRANSFER)
                await anyio.to_thread.run_sync(_closing_connections(lambda: _wait_for(_held, "the call to be held")))
                group.cancel_scope.cancel()  # the agent goes away while its call waits

        anyio.run(scenario)
        node = _wait_for(lambda: Node.objects.filter(key__startswith="proxy-call-", step__isnull=False).first(), "it")

    approval = node.approvals.get()
    assert node.status == "REJECTED" and node.step.status == "REFUSED"
    assert approval.status == "REJECTED" and approval.decided_by == "system:proxy"
    with pytest.raises(ServiceError, match="not waiting for approval"):
        invoke(OPERATIONS["approve_saga_step"], operator, {"saga_id": str(node.saga_id), "node_id": str(node.id)})


def test_another_tenant_neither_sees_nor_decides_a_held_call(
    tmp_path: Path, demo_http: HttpDownstream, outsider: Principal
):
    seen: dict[str, Any] = {}

    def operator() -> None:
        node = _wait_for(_held, "the call to be held")
        seen["queue"] = approvals_pending(actor=outsider).approvals
        for attempt in (
            lambda: saga_get(actor=outsider, saga_id=node.saga_id),
            lambda: invoke(
                OPERATIONS["approve_saga_step"], outsider, {"saga_id": str(node.saga_id), "node_id": str(node.id)}
            ),
        ):
            try:
                attempt()
            except ServiceError as refused:
                seen.setdefault("refusals", []).append(refused.code)
        seen["cli"] = at_terminal("approve", str(node.id), tenant="globex")
        at_terminal("deny", str(node.id))  # the owner tenant ends it

    answer, sent = _transfer_while(tmp_path, demo_http, operator)

    assert seen["queue"] == [] and seen["refusals"] == ["SAGA_NOT_FOUND", "SAGA_NOT_FOUND"]
    assert seen["cli"].returncode != 0 and "HELD_CALL_NOT_FOUND" in seen["cli"].stdout
    assert answer.is_error and sent == []
