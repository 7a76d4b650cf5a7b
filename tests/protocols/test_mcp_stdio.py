"""MCP over stdio: a local client starts `semantic-saga mcp` and runs a saga as the local operator."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path
from typing import Any

from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

from registry.services import registry_load_file
from sagas.models import Saga
from sagas.states import SagaStatus
from tests.distributed.workers import shared_database_url
from tests.protocols.mcp_client import call, refused, unknown_tool

ROOT = Path(__file__).resolve().parents[2]


BIN = Path(sys.executable).parent  # the virtualenv's bin (not resolved: the console scripts live there)


def _params(tmp_path: Path, command: list[str]) -> StdioServerParameters:
    env = {**os.environ, "DATABASE_URL": shared_database_url(), "SAGA_FILE_ROOT": str(tmp_path)}
    return StdioServerParameters(command=str(BIN / command[0]), args=command[1:], env=env, cwd=str(ROOT))


def _lifecycle(params: StdioServerParameters) -> dict[str, Any]:
    async def scenario() -> dict[str, Any]:
        async with Client(stdio_client(params)) as client:
            sid = (await call(client, "begin_saga", {"metadata": {"via": "stdio"}}))["id"]
            await call(
                client,
                "plan_saga_step",
                {
                    "saga_id": sid,
                    "action": "create_text_file",
                    "input": {"path": "inventory.txt", "content": "sku-1: -1"},
                },
            )
            await call(client, "run_ready_steps", {"saga_id": sid})
            bad = await refused(client, "commit_saga", {"saga_id": sid, "force": True})
            assert bad["code"] == "INVALID_ARGUMENTS"
            # as over HTTP: an unknown tool is a -32602 protocol error naming the tools, and the session goes on
            unknown = await unknown_tool(client, "force_commit")
            assert "Unknown tool 'force_commit'" in unknown.message and "commit_saga" in unknown.message
            return await call(client, "commit_saga", {"saga_id": sid})

    return asyncio.run(scenario())


def test_stdio_session_runs_a_saga_as_the_local_operator(tmp_path: Path):
    registry_load_file(ROOT / "examples" / "action_registry.json")
    saga = _lifecycle(_params(tmp_path, ["semantic-saga", "mcp"]))
    assert saga["status"] == "COMMITTED"
    assert saga["metadata"]["_identity"]["principal_id"] == "local-operator"
    assert saga["metadata"]["_identity"]["protocol"] == "stdio"
    assert (tmp_path / "inventory.txt").read_text() == "sku-1: -1"
    assert Saga.objects.get(pk=saga["id"]).status == SagaStatus.COMMITTED


def test_seed_compatible_command_line_serves_stdio(tmp_path: Path):
    # the replaced product's quick start: semantic-saga-mcp --database ... --actions ...
    command = ["semantic-saga-mcp", "--actions", str(ROOT / "examples" / "action_registry.json")]
    saga = _lifecycle(_params(tmp_path, command))
    assert saga["status"] == "COMMITTED"
