"""`semantic-saga serve` with SAGA_PROXY_CONFIG serves the proxy at /proxy/mcp behind the bearer auth and roles
of /mcp, in both protocol eras. One served instance per module, in front of the demo world and the tiny server
(both stdio, started by the served process)."""

from __future__ import annotations

import asyncio
import json
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.protocols.conftest import ALICE, VERA, wait_healthy
from tests.proxy.agent import MODES, Agent, connect, text, tool_names
from tests.proxy.harness import DEMO, READY_SECONDS, ROOT, TINY, config_file, serve_command, stdio


@dataclass
class Served:
    base: str
    proc: subprocess.Popen[bytes]
    log: Path

    @property
    def url(self) -> str:
        return f"{self.base}/proxy/mcp"


@pytest.fixture(autouse=True)
def _committed_db(transactional_db: None) -> None:
    """The server is another process: it needs the migrated test database."""


@pytest.fixture(scope="module")
def server(
    django_db_setup: None, django_db_blocker: object, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Served]:
    workdir = tmp_path_factory.mktemp("proxy-serve")
    config = config_file(workdir, {"demo": stdio(DEMO), "tiny": stdio(TINY, prefix="tiny")})
    command, env, port = serve_command(workdir, config)
    log = workdir / "serve.log"
    with log.open("ab") as out:
        proc = subprocess.Popen(command, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
    running = Served(f"http://127.0.0.1:{port}", proc, log)
    try:
        _wait_healthy(running)
        yield running
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def _wait_healthy(running: Served) -> None:
    wait_healthy(running.base, running.proc, running.log, READY_SECONDS)


@pytest.mark.parametrize("mode", MODES)
def test_an_operator_uses_the_downstreams_through_proxy_mcp(server: Served, mode: str):
    async def scenario() -> tuple[list[str], dict[str, object]]:
        async with connect(server.url, mode, token=ALICE) as client:
            names = await tool_names(client)
            created = await client.call_tool("create_contact", {"name": "Kay", "email": "kay@example.com"})
            assert not created.is_error, text(created)
            assert created.structured_content is not None
            return names, created.structured_content

    names, contact = asyncio.run(scenario())

    assert "create_contact" in names and "tiny__send_email" in names and "send_email" in names
    assert contact["email"] == "kay@example.com"


def test_proxy_mcp_without_a_token_is_refused_with_a_bearer_challenge(server: Served):
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}

    answer = httpx.post(server.url, json=body, headers=headers, timeout=10)

    assert answer.status_code == 401
    assert answer.headers["www-authenticate"].startswith("Bearer")


@pytest.mark.parametrize("mode", MODES)
def test_a_viewer_may_list_but_not_call(server: Served, mode: str):
    async def scenario() -> tuple[list[str], bool, str]:
        async with connect(server.url, mode, token=VERA) as client:
            names = await tool_names(client)
            result = await client.call_tool("create_contact", {"name": "Vee", "email": "vee@example.com"})
            return names, result.is_error, text(result)

    names, is_error, message = asyncio.run(scenario())

    assert "create_contact" in names
    assert is_error
    assert message.startswith("create_contact did not run and was not sent: vera may read but not act")


def test_a_downstream_elicitation_reaches_the_agent_over_http(server: Served):
    agent = Agent(answer="over http")

    async def scenario() -> str:
        async with connect(server.url, "legacy", agent, token=ALICE) as client:
            return text(await client.call_tool("tiny__ask_user", {"question": "Still there?"}))

    answer = json.loads(asyncio.run(scenario()))

    assert answer == {"action": "accept", "content": {"answer": "over http"}}
    assert agent.elicitations == ['[asked by the MCP server "tiny", not by Semantic Saga]\nStill there?']


def test_serve_refuses_an_invalid_proxy_config_naming_the_check(tmp_path: Path):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"servers": {"demo": {"command": "x", "prefix": "a__b"}}}))
    command, env, _ = serve_command(tmp_path, bad)

    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, timeout=120)

    output = done.stdout.decode() + done.stderr.decode()
    assert done.returncode != 0
    assert "SAGA_PROXY_CONFIG:" in output and "servers.demo.prefix" in output and "(saga.E050)" in output
