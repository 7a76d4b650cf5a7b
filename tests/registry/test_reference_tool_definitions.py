"""The official reference servers the shipped packs are tested against (pinned in tests/proxy/reference_servers/,
installed on first use) and the demo world, as they really list their tools: the verb lexicon classes each tool as
its name and honest annotations say, and the description scan finds no sign of poisoning in any of them (a false
sign would hold an honest tool at its first use)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

from registry.tool_classes import classify
from registry.tool_poisoning import poisoning_signs
from tests.proxy.conftest import load_demo_world
from tests.proxy.reference import git_server, npm_server

# Each reference server's reads; every other tool it lists changes something.
READS = {
    "filesystem": {
        "read_file",
        "read_text_file",
        "read_media_file",
        "read_multiple_files",
        "list_directory",
        "list_directory_with_sizes",
        "directory_tree",
        "search_files",
        "get_file_info",
        "list_allowed_directories",
    },
    "memory": {"read_graph", "search_nodes", "open_nodes"},
    "git": {"git_status", "git_diff_unstaged", "git_diff_staged", "git_diff", "git_log", "git_show", "git_branch"},
}


def _listed(command: str, args: list[str], env: dict[str, str]) -> list[dict[str, Any]]:
    """The server's tools in wire form, as the proxy reads them."""

    async def tools() -> list[dict[str, Any]]:
        params = StdioServerParameters(command=command, args=args, env={**os.environ, **env})
        async with Client(stdio_client(params)) as client:
            listed = (await client.list_tools()).tools
        return [tool.model_dump(by_alias=True, exclude_none=True, mode="json") for tool in listed]

    return anyio.run(tools)


@pytest.fixture(scope="module")
def reference_tools(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[dict[str, Any]]]:
    root: Path = tmp_path_factory.mktemp("reference")
    subprocess.run(["git", "init", "-q", str(root / "repo")], check=True)
    return {
        "filesystem": _listed(str(npm_server("mcp-server-filesystem")), [str(root)], {}),
        "memory": _listed(str(npm_server("mcp-server-memory")), [], {"MEMORY_FILE_PATH": str(root / "m.jsonl")}),
        "git": _listed(str(git_server()), ["--repository", str(root / "repo")], {}),
    }


def _demo_tools() -> list[dict[str, Any]]:
    world = load_demo_world()

    async def tools() -> list[dict[str, Any]]:
        async with Client(world.build_server(world.World())) as client:
            listed = (await client.list_tools()).tools
        return [tool.model_dump(by_alias=True, exclude_none=True, mode="json") for tool in listed]

    return anyio.run(tools)


def test_each_reference_tool_is_classed_by_its_name_and_honest_annotations(
    reference_tools: dict[str, list[dict[str, Any]]],
) -> None:
    # given every tool the reference servers list, with its annotations, no rule and no pack
    for server, tools in reference_tools.items():
        classes = {
            tool["name"]: classify(tool["name"], server, tool.get("annotations"), [], False).effect_class
            for tool in tools
        }
        # then exactly their reads are reads, and nothing they list is lost or new
        assert {name for name, effect_class in classes.items() if effect_class == "read"} == READS[server]
        assert all(effect_class == "unknown" for name, effect_class in classes.items() if name not in READS[server])
        # and no read annotation is contradicted by a verb the lexicon reads in a read's name
        assert all(
            classify(name, server, {"readOnlyHint": True}, [], False).effect_class == "read" for name in READS[server]
        )


def test_no_reference_or_demo_tool_shows_a_sign_of_poisoning(reference_tools: dict[str, list[dict[str, Any]]]) -> None:
    # given every server of a proxy holding the three reference servers and the demo world
    servers = {**reference_tools, "demo": _demo_tools()}
    names = {server: {tool["name"] for tool in tools} for server, tools in servers.items()}
    for server, tools in servers.items():
        other_tools = {name for other, listed in names.items() if other != server for name in listed}
        # then none of their definitions (descriptions, schemas, annotations) shows a sign, checked against the
        # other servers' tool names too
        flagged = {tool["name"]: poisoning_signs(tool, other_tools) for tool in tools}
        assert {name: signs for name, signs in flagged.items() if signs} == {}
