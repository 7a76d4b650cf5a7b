"""The proxy is transparent: the official client sees the union of the downstreams' tools under their own names
(prefix__name where the config asks), calls reach the right server, and resources, prompts and instructions pass
through. One proxy per module, served over Streamable HTTP, in front of the demo world (HTTP) and the tiny
server (stdio, prefix `tiny`)."""

from __future__ import annotations

import asyncio
import json
import uuid

import httpx
import pytest
from mcp.shared.exceptions import MCPError
from mcp_types.jsonrpc import INVALID_PARAMS

from audit.canonical import sha256_hex
from tests.proxy.agent import MODES, connect, text, tool_names
from tests.proxy.harness import HttpDownstream, ServedProxy

DEMO_TOOLS = [
    "get_contact",
    "list_contacts",
    "create_contact",
    "update_contact",
    "delete_contact",
    "send_email",
    "post_tweet",
    "list_timeline",
    "transfer_funds",
    "get_call_log",
]
TINY_TOOLS = ["send_email", "ask_user", "summarize", "client_roots", "slow_report", "add_tool", "break_listing"]


@pytest.mark.parametrize("mode", MODES)
def test_tools_list_is_the_paginated_union_under_downstream_names(served: ServedProxy, mode: str):
    async def scenario() -> tuple[list[str], str | None]:
        async with connect(served.url, mode) as client:
            first = await client.list_tools()
            return await tool_names(client), first.next_cursor

    # when
    names, cursor = asyncio.run(scenario())

    # then: every demo tool under its own name, every tiny tool (listed three per page by tiny) as tiny__name
    assert names[: len(DEMO_TOOLS)] == DEMO_TOOLS
    assert [f"tiny__{name}" for name in TINY_TOOLS] == [n for n in names if n.startswith("tiny__")][: len(TINY_TOOLS)]
    assert "send_email" in names and "tiny__send_email" in names
    assert cursor is not None  # three per page: the client had to follow the cursor


@pytest.mark.parametrize("mode", MODES)
def test_calls_reach_the_server_that_owns_the_name(served: ServedProxy, demo_http: HttpDownstream, mode: str):
    email = f"{uuid.uuid4().hex[:8]}@example.com"

    async def scenario() -> tuple[dict[str, object], str]:
        async with connect(served.url, mode) as client:
            created = await client.call_tool("create_contact", {"name": "Ada", "email": email})
            tiny = await client.call_tool("tiny__send_email", {"to": email, "subject": "hi"})
            assert not created.is_error and not tiny.is_error, (text(created), text(tiny))
            assert created.structured_content is not None
            return created.structured_content, text(tiny)

    # when
    contact, tiny_answer = asyncio.run(scenario())

    # then: the demo world holds the contact; tiny's own send_email answered the prefixed call
    world = httpx.get(f"http://127.0.0.1:{demo_http.port}/world", timeout=10).json()
    assert world["contacts"][contact["id"]]["email"] == email
    assert json.loads(tiny_answer)["to"] == email
    assert all(call["tool"] != "send_email" or call["arguments"]["to"] != email for call in world["calls"])


def test_instructions_are_passed_on_labelled_with_their_server(served: ServedProxy):
    async def scenario() -> str | None:
        async with connect(served.url, "legacy") as client:
            return client.instructions

    instructions = asyncio.run(scenario())

    assert instructions == (
        'Instructions from the MCP server "demo":\nA toy CRM, email outbox, tweet timeline and bank.\n\n'
        'Instructions from the MCP server "tiny":\nA tiny world for proxy tests.'
    )


def test_each_tool_carries_its_downstream_definition_hash(served: ServedProxy, demo_http: HttpDownstream):
    async def downstream_definition() -> dict[str, object]:
        async with connect(demo_http.url, "legacy") as client:
            tool = next(t for t in (await client.list_tools()).tools if t.name == "update_contact")
            annotations = tool.annotations.model_dump(mode="json", by_alias=True, exclude_none=True)  # type: ignore[union-attr]
            # name, title, description, input and output schemas, annotations: what an agent reads and relies on
            wire = {"name": tool.name, "description": tool.description, "inputSchema": tool.input_schema}
            if tool.output_schema is not None:
                wire["outputSchema"] = tool.output_schema
            return {**wire, "annotations": annotations}

    expected = sha256_hex(asyncio.run(downstream_definition()))

    catalog = served.proxy.downstreams.catalog
    assert catalog.tools["update_contact"].definition_hash == expected
    assert catalog.tools["tiny__send_email"].tool.name == "send_email"  # the downstream name is kept for the call


@pytest.mark.parametrize("mode", MODES)
def test_an_unknown_tool_is_a_protocol_error_naming_the_tools(served: ServedProxy, mode: str):
    async def scenario() -> MCPError:
        async with connect(served.url, mode) as client:
            with pytest.raises(MCPError) as refused:
                await client.call_tool("send_mail", {})
            return refused.value

    error = asyncio.run(scenario())

    assert error.code == INVALID_PARAMS
    assert "Unknown tool 'send_mail': nothing was called" in error.message and "tiny__send_email" in error.message


@pytest.mark.parametrize("mode", MODES)
def test_resources_and_templates_are_proxied_under_the_servers_prefix(served: ServedProxy, mode: str):
    async def scenario() -> tuple[list[str], list[str], str, str]:
        async with connect(served.url, mode) as client:
            resources = [r.uri for r in (await client.list_resources()).resources]
            templates = [t.uri_template for t in (await client.list_resource_templates()).resource_templates]
            welcome = await client.read_resource("tiny+note://welcome")
            expanded = await client.read_resource("tiny+note://shopping")
            return resources, templates, welcome.contents[0].text, expanded.contents[0].uri  # type: ignore[union-attr]

    resources, templates, welcome, expanded_uri = asyncio.run(scenario())

    assert resources == ["tiny+note://welcome"]
    assert templates == ["tiny+note://{name}"]
    assert welcome == "Welcome to the tiny world."
    assert expanded_uri == "tiny+note://shopping"


@pytest.mark.parametrize("mode", MODES)
def test_an_unknown_resource_is_not_found(served: ServedProxy, mode: str):
    async def scenario() -> MCPError:
        async with connect(served.url, mode) as client:
            with pytest.raises(MCPError) as refused:
                await client.read_resource("file:///etc/passwd")
            return refused.value

    error = asyncio.run(scenario())

    # 2025-11-25's -32002; 2026-07-28 (auto) moved an unknown resource to -32602 (SEP-2164), as /mcp answers it
    assert error.code == (-32602 if mode == "auto" else -32002)
    assert "Resource not found: file:///etc/passwd. No downstream server lists it" in error.message


@pytest.mark.parametrize("mode", MODES)
def test_prompts_are_proxied(served: ServedProxy, mode: str):
    async def scenario() -> tuple[list[str], str]:
        async with connect(served.url, mode) as client:
            prompts = [p.name for p in (await client.list_prompts()).prompts]
            prompt = await client.get_prompt("tiny__greeting", {"name": "Grace"})
            return prompts, prompt.messages[0].content.text  # type: ignore[union-attr]

    prompts, message = asyncio.run(scenario())

    assert prompts == ["tiny__greeting"]
    assert message == "Say hello to Grace."
