"""A2A tasks are durable: they outlive the server process that created them. And an unexpected error inside a
command marks its task FAILED, naming only the error's type."""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path
from typing import Any

import httpx
import pytest
from a2a.types.a2a_pb2 import GetTaskRequest
from django.test import override_settings
from starlette.applications import Starlette
from starlette.routing import Route

from sagas.models import A2ATask
from sagas.protocols.a2a import commands as a2a
from sagas.protocols.a2a.http import build_http_app
from tests.protocols.a2a_client import COMPLETED, connect, result
from tests.protocols.conftest import ALICE, BOB, start_server


def test_a_task_is_read_again_after_the_server_restarts(tmp_path: Path):
    # given a task created by one server process
    first = start_server(tmp_path)

    async def create() -> tuple[str, str]:
        async with connect(first.base, ALICE) as alice:
            begun = await alice.send({"operation": "begin", "metadata": {"order": "7"}})
            return begun.id, result(begun)["id"]

    try:
        task_id, saga_id = asyncio.run(create())
    finally:
        first.proc.terminate()
        first.proc.wait(timeout=30)
    assert first.proc.returncode is not None

    # when a new process serves on the same address
    second = start_server(tmp_path, port=int(first.base.rsplit(":", 1)[1]))

    async def read() -> tuple[Any, dict[str, Any]]:
        async with connect(second.base, BOB) as bob:
            task = await bob.client.get_task(GetTaskRequest(id=task_id))
            return task, await bob.ok({"operation": "get", "saga_id": saga_id})

    try:
        task, saga = asyncio.run(read())
    finally:
        second.proc.terminate()
        second.proc.wait(timeout=30)

    # then another peer of the tenant reads the task, its result and the saga
    assert task.id == task_id and task.status.state == COMPLETED
    assert result(task)["id"] == saga_id and saga["metadata"]["_interop"]["task_id"] == task_id


def test_an_unexpected_error_fails_the_task_exposing_only_its_type(monkeypatch: pytest.MonkeyPatch):
    # given a handler that breaks with internals in its message (in this process: a server cannot be patched)
    def broken(actor: Any, args: Any) -> dict[str, Any]:
        raise RuntimeError("password=hunter2 at db-7.internal")

    monkeypatch.setitem(a2a.A2A_OPERATIONS, "get", dataclasses.replace(a2a.A2A_OPERATIONS["get"], handler=broken))

    async def scenario() -> Any:
        app = build_http_app()
        asgi = Starlette(routes=[*app.public_routes, Route("/a2a", endpoint=app.rpc_endpoint)])
        transport = httpx.ASGITransport(app=asgi)
        async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as http:
            body = {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "SendMessage",
                "params": {
                    "message": {
                        "messageId": "m1",
                        "role": "ROLE_USER",
                        "parts": [{"data": {"operation": "get", "saga_id": "x"}}],
                    }
                },
            }
            answer = await http.post("/a2a", json=body, headers={"A2A-Version": "1.0"})
        await app.handler.aclose()
        return answer.json()["result"]["task"]

    # when a peer sends the command (auth mode none: the local admin)
    with override_settings(SAGA_AUTH_MODE="none"):
        task = asyncio.run(scenario())

    # then the task is FAILED, says what failed and what to do, and leaks nothing else
    assert task["status"]["state"] == "TASK_STATE_FAILED"
    text = task["status"]["message"]["parts"][0]["text"]
    assert "get failed unexpectedly (RuntimeError)" in text and "hunter2" not in text and "db-7" not in text
    assert A2ATask.objects.get(pk=task["id"]).state == "TASK_STATE_FAILED"
