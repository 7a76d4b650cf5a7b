"""A preview session says so to the agent at its start (issue 28, item 6): the `instructions` of the proxy's
initialize result begin with the notice that nothing reaches the world, before the downstreams' own instructions,
over Streamable HTTP and over stdio (`semantic-saga proxy --preview`); outside preview there is no such notice. The
official mcp client reads them, as an agent's client does."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import anyio
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

from sagas.protocols.proxy.server import PREVIEW_NOTICE
from tests.distributed.workers import shared_database_url
from tests.proxy.agent import connect
from tests.proxy.harness import ROOT, TINY, HttpDownstream, config_file, serve_proxy, stdio

pytestmark = pytest.mark.django_db(transaction=True)
BIN = Path(sys.executable).parent
TINY_BLOCK = 'Instructions from the MCP server "tiny":\nA tiny world for proxy tests.'


async def _instructions_over_http(url: str) -> str | None:
    async with connect(url, "legacy") as client:
        return client.instructions


@pytest.mark.parametrize("preview", [True, False])
def test_over_http_a_preview_session_is_announced_before_the_downstreams_instructions(
    tmp_path: Path, demo_http: HttpDownstream, preview: bool
):
    # given a proxy in front of the demo world and tiny (whose instructions are passed on)
    servers = {"demo": {"url": demo_http.url}, "tiny": stdio(TINY, prefix="tiny")}
    config = config_file(tmp_path, servers, preview=preview)
    # when an agent's client connects
    with serve_proxy(config) as served:
        instructions = anyio.run(_instructions_over_http, served.url) or ""
    # then in preview it is told first that nothing reaches the world, and the downstream's block still follows
    if preview:
        assert instructions.startswith(PREVIEW_NOTICE)
        assert "nothing you do in this session reaches the real world" in instructions
        assert "recorded but NOT executed" in instructions
    else:
        assert "PREVIEW" not in instructions
    assert instructions.endswith(TINY_BLOCK)


def test_over_stdio_the_preview_flag_announces_the_dry_run_at_initialize(tmp_path: Path):
    # given `semantic-saga proxy --preview`, as a local client (Claude Code) starts it
    config = config_file(tmp_path, {"tiny": stdio(TINY)})
    command = [str(BIN / "semantic-saga"), "proxy", "--config", str(config), "--preview"]
    env = {**os.environ, "DATABASE_URL": shared_database_url()}
    params = StdioServerParameters(command=command[0], args=command[1:], env=env, cwd=str(ROOT))

    async def initialize() -> str | None:
        async with Client(stdio_client(params), mode="legacy") as client:
            return client.instructions

    # when the client initializes
    instructions = anyio.run(initialize) or ""
    # then the notice comes first, the server's own instructions after it
    assert instructions.startswith(PREVIEW_NOTICE)
    assert instructions.endswith(TINY_BLOCK)
