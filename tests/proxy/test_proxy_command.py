"""`semantic-saga proxy --config FILE` end to end: a local client starts it over stdio; the proxy starts its stdio
downstreams and serves their union as the local operator; a collision stops it with the prefix to add."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

from sagas.models import Step
from tests.distributed.workers import shared_database_url
from tests.proxy.agent import Agent, text
from tests.proxy.harness import DEMO, ROOT, TINY, config_file, stdio

# The proxy journals every call: its subprocess writes to this test database.
pytestmark = pytest.mark.django_db(transaction=True)
BIN = Path(sys.executable).parent  # the virtualenv's bin (not resolved: the console scripts live there)


@pytest.fixture(autouse=True)
def _committed_db(transactional_db: None) -> None:
    """The proxy is another process: it checks the (migrated) test database before it starts."""


def _command(config: Path, *extra: str) -> list[str]:
    return [str(BIN / "semantic-saga"), "proxy", "--config", str(config), *extra]


def _env() -> dict[str, str]:
    return {**os.environ, "DATABASE_URL": shared_database_url()}


def test_the_stdio_proxy_serves_its_downstreams_to_a_local_client(tmp_path: Path):
    config = config_file(tmp_path, {"demo": stdio(DEMO), "tiny": stdio(TINY, prefix="tiny")})
    command = _command(config)
    params = StdioServerParameters(command=command[0], args=command[1:], env=_env(), cwd=str(ROOT))
    agent = Agent(answer="yes")

    async def scenario() -> dict[str, Any]:
        async with Client(stdio_client(params), mode="legacy", **agent.callbacks()) as client:
            names = []
            cursor = None
            while True:
                page = await client.list_tools(cursor=cursor)
                names += [tool.name for tool in page.tools]
                if (cursor := page.next_cursor) is None:
                    break
            created = await client.call_tool("create_contact", {"name": "Lin", "email": "lin@example.com"})
            asked = await client.call_tool("tiny__ask_user", {"question": "Proceed?"})
            return {
                "names": names,
                "created": created.structured_content,
                "asked": json.loads(text(asked)),
                "instructions": client.instructions,
                "server": client.server_info.name if client.server_info else None,
            }

    seen = asyncio.run(scenario())

    assert seen["server"] == "semantic-saga-proxy"
    assert "create_contact" in seen["names"] and "tiny__ask_user" in seen["names"]
    assert seen["created"]["email"] == "lin@example.com"
    assert seen["asked"] == {"action": "accept", "content": {"answer": "yes"}}
    assert agent.elicitations == ['[asked by the MCP server "tiny", not by Semantic Saga]\nProceed?']
    assert 'Instructions from the MCP server "tiny":' in seen["instructions"]


def test_the_stdio_proxy_refuses_to_start_on_a_collision_naming_the_prefix(tmp_path: Path):
    config = config_file(tmp_path, {"demo": stdio(DEMO), "tiny": stdio(TINY)})

    done = subprocess.run(_command(config), env=_env(), cwd=ROOT, input=b"", capture_output=True, timeout=120)

    stderr = done.stderr.decode()
    assert done.returncode != 0
    assert f"semantic-saga proxy did not start ({config}):" in stderr
    assert "both expose the tool 'send_email'" in stderr and 'add "prefix": "tiny"' in stderr


def test_the_stdio_proxy_refuses_a_bad_config_naming_the_problem(tmp_path: Path):
    config = config_file(tmp_path, {"demo": {"command": sys.executable, "url": "http://127.0.0.1:1/mcp"}})

    done = subprocess.run(_command(config), env=_env(), cwd=ROOT, input=b"", capture_output=True, timeout=120)

    assert done.returncode != 0
    assert "servers.demo: give either command (a stdio server) or url" in done.stderr.decode()


def test_preview_forwards_reads_and_records_the_rest_dry(tmp_path: Path):
    config = config_file(tmp_path, {"demo": stdio(DEMO)})
    command = _command(config, "--preview")
    params = StdioServerParameters(command=command[0], args=command[1:], env=_env(), cwd=str(ROOT))

    async def scenario() -> tuple[str, list[str]]:
        async with Client(stdio_client(params), mode="legacy") as client:
            await client.call_tool("get_contact", {"id": "c-404"})
            refused = await client.call_tool("create_contact", {"name": "Dry", "email": "dry@example.com"})
            assert refused.is_error
            log = await client.call_tool("get_call_log", {})
            assert log.structured_content is not None
            return text(refused), [call["tool"] for call in log.structured_content["calls"]]

    refusal, calls = asyncio.run(scenario())

    assert refusal.startswith("PREVIEW: create_contact was recorded, NOT executed")
    assert calls == ["get_contact"]  # the read ran; create_contact never reached the world


def _rpc(proxy: subprocess.Popen[str], request_id: int, method: str, params: dict[str, Any]) -> dict[str, Any]:
    assert proxy.stdin is not None and proxy.stdout is not None
    proxy.stdin.write(json.dumps({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}) + "\n")
    proxy.stdin.flush()
    while True:
        answer = json.loads(proxy.stdout.readline())
        if answer.get("id") == request_id:
            return dict(answer)


def test_sigterm_stops_the_stdio_proxy_with_every_read_in_the_ledger(tmp_path: Path):
    # given a stdio proxy whose reads are journaled behind their answers, and a client that made five reads
    config = config_file(tmp_path, {"demo": stdio(DEMO)})
    proxy = subprocess.Popen(
        _command(config), stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=_env(), cwd=str(ROOT)
    )
    hello = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
    _rpc(proxy, 1, "initialize", hello)
    assert proxy.stdin is not None
    proxy.stdin.write(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}) + "\n")
    for request_id in range(2, 7):
        answer = _rpc(proxy, request_id, "tools/call", {"name": "list_contacts", "arguments": {}})
        assert not answer["result"].get("isError"), answer
    # when its supervisor stops it with SIGTERM, stdin still open
    proxy.terminate()
    proxy.wait(timeout=60)
    # then every read is in the ledger (none was lost with the process)
    assert Step.objects.filter(action="proxy.demo.list_contacts", status="COMPLETED").count() == 5
