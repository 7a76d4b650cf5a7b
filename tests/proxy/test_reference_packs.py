"""The packs shipped for the official reference MCP servers, against the real servers: an agent session through the
journaled proxy (the official `mcp` client over Streamable HTTP, the server over stdio as a client starts it), then
`semantic-saga undo`, and the server's world compared with what it was before the session. The servers are the
npm packages pinned in tests/proxy/reference_servers/package-lock.json, installed here when missing (npm ci)."""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
from collections.abc import Iterator
from io import StringIO
from pathlib import Path
from typing import Any

import anyio
import pytest
from django.core.management import call_command
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

from sagas.protocols.proxy.config import ProxyConfigError, load_proxy_config
from sagas.protocols.proxy.runtime import journaled
from tests.proxy.agent import connect, text
from tests.proxy.demo_session import command
from tests.proxy.harness import config_file, serve_proxy

pytestmark = pytest.mark.django_db(transaction=True)
SERVERS = Path(__file__).resolve().parent / "reference_servers"
MEMORY = SERVERS / "node_modules" / ".bin" / "mcp-server-memory"
INSTALL_SECONDS = 300


@pytest.fixture(scope="module")
def installed() -> Path:
    """The pinned reference servers (npm ci once; a machine without npm fails here, saying so). A lock file keeps two
    test workers from installing into the same directory at once."""
    with (SERVERS / ".install.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not MEMORY.exists():
            npm = subprocess.run(
                ["npm", "ci", "--no-audit", "--no-fund", "--loglevel=error"],
                cwd=SERVERS,
                capture_output=True,
                text=True,
                timeout=INSTALL_SECONDS,
            )
            assert npm.returncode == 0, f"npm ci in {SERVERS} failed (Node.js and npm are needed):\n{npm.stderr}"
    return MEMORY


@pytest.fixture(autouse=True)
def _acme(settings: Any) -> None:
    settings.SAGA_DEFAULT_TENANT = "acme"  # the commands act as the local operator of the proxy's tenant


@pytest.fixture
def memory(installed: Path, tmp_path: Path) -> Iterator[dict[str, Any]]:
    """The memory server's configuration entry, its graph in a file of this test."""
    yield {"command": str(installed), "env": {"MEMORY_FILE_PATH": str(tmp_path / "memory.jsonl")}}


def _graph(server: dict[str, Any]) -> dict[str, Any]:
    """The graph as the server itself reads it (read_graph, called directly, not through the proxy)."""

    async def read() -> dict[str, Any]:
        params = StdioServerParameters(command=server["command"], env={**os.environ, **server["env"]})
        async with Client(stdio_client(params)) as client:
            return dict((await client.call_tool("read_graph", {})).structured_content or {})

    return anyio.run(read)


def _direct(server: dict[str, Any], tool: str, arguments: dict[str, Any]) -> None:
    async def call() -> None:
        params = StdioServerParameters(command=server["command"], env={**os.environ, **server["env"]})
        async with Client(stdio_client(params)) as client:
            assert not (await client.call_tool(tool, arguments)).is_error

    anyio.run(call)


def _session(tmp_path: Path, server: dict[str, Any], calls: list[tuple[str, dict[str, Any]]]) -> None:
    config = config_file(tmp_path, {"memory": server}, packs=["builtin:memory"])
    with serve_proxy(config, call_path=journaled) as served:

        async def agent() -> None:
            async with connect(served.url, "legacy") as client:
                for tool, arguments in calls:
                    answer = await client.call_tool(tool, arguments)
                    assert not answer.is_error, text(answer)

        anyio.run(agent)


def _person(name: str, *observations: str) -> dict[str, Any]:
    return {"name": name, "entityType": "person", "observations": list(observations)}


def test_a_memory_session_undone_leaves_the_graph_as_it_was(tmp_path: Path, memory: dict[str, Any]):
    # given a graph that already knows Grace
    _direct(memory, "create_entities", {"entities": [_person("Grace", "admiral")]})
    before = _graph(memory)
    # when the agent creates Ada and Lin (and names Grace again: the server leaves her out of its answer) and relates
    # them, then the session is undone
    _session(
        tmp_path,
        memory,
        [
            ("create_entities", {"entities": [_person("Ada", "math"), _person("Lin"), _person("Grace")]}),
            (
                "create_relations",
                {
                    "relations": [
                        {"from": "Ada", "to": "Lin", "relationType": "knows"},
                        {"from": "Grace", "to": "Ada", "relationType": "mentors"},
                    ]
                },
            ),
        ],
    )
    assert {e["name"] for e in _graph(memory)["entities"]} == {"Grace", "Ada", "Lin"}
    report = json.loads(command("undo", "--json"))
    # then both calls ran their exact inverse, and the graph is the one before the session, Grace untouched
    assert [(item["tool"], item["verdict"]) for item in report["items"]] == [
        ("create_relations", "undone"),
        ("create_entities", "undone"),
    ]
    assert report["items"][1]["inverse"] == {"tool": "delete_entities", "arguments": {"entityNames": ["Ada", "Lin"]}}
    assert _graph(memory) == before


def test_what_the_memory_pack_cannot_undo_is_classed_with_its_reason(tmp_path: Path, memory: dict[str, Any]):
    _direct(memory, "create_entities", {"entities": [_person("Grace", "admiral")]})
    _session(
        tmp_path, memory, [("add_observations", {"observations": [{"entityName": "Grace", "contents": ["navy"]}]})]
    )
    row = json.loads(command("ledger", "--json").splitlines()[0])
    assert (row["class"], row["class_source"]) == ("C", "pack")
    assert "addedObservations" in row["class_reason"]
    report = json.loads(command("undo", "--dry-run", "--json"))
    assert [(item["tool"], item["verdict"]) for item in report["items"]] == [("add_observations", "needs_decision")]


def test_a_pack_that_does_not_ship_is_refused_naming_the_ones_that_do(tmp_path: Path):
    config = config_file(tmp_path, {"memory": {"command": "true"}}, packs=["builtin:nope"])
    with pytest.raises(ProxyConfigError) as refused:
        load_proxy_config(config)
    assert "no pack 'builtin:nope' ships with Semantic Saga" in refused.value.message
    assert "builtin:memory" in refused.value.message


def test_a_draft_for_the_memory_server_proposes_the_inverses_its_pack_ships(tmp_path: Path, memory: dict[str, Any]):
    out, err = StringIO(), StringIO()
    config = config_file(tmp_path, {"memory": memory})
    call_command("packs", "draft", "memory", "--config", str(config), "--timeout", "30", stdout=out, stderr=err)
    drafted = {entry["tool"]: entry["inverse"] for entry in json.loads(out.getvalue())["entries"]}
    # the list projection from the answer's schema, and the relations the answer lists
    assert drafted["create_entities"] == {
        "tool": "delete_entities",
        "args": {"entityNames": "$.result.entities[*].name"},
    }
    assert drafted["create_relations"] == {"tool": "delete_relations", "args": {"relations": "$.result.relations"}}


def test_the_memory_draft_leaves_add_observations_unpaired(tmp_path: Path, memory: dict[str, Any]):
    out, err = StringIO(), StringIO()
    config = config_file(tmp_path, {"memory": memory})
    call_command("packs", "draft", "--config", str(config), "memory", stdout=out, stderr=err)
    assert "add_observations" not in {entry["tool"] for entry in json.loads(out.getvalue())["entries"]}
    assert "no pair for add_observations" in err.getvalue()
