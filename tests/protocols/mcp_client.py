"""The official MCP client, with a bearer token, in either protocol era."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx2
import jsonschema
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_types.jsonrpc import INVALID_PARAMS

from sagas.operations.table import OPERATIONS

MODES = ["legacy", "auto"]


@asynccontextmanager
async def connect(url: str, token: str | None, mode: str) -> AsyncIterator[Client]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    timeout = httpx2.Timeout(30.0, read=120.0)
    async with (
        httpx2.AsyncClient(headers=headers, timeout=timeout) as http,
        Client(streamable_http_client(url, http_client=http), mode=mode) as client,
    ):
        yield client


async def call(client: Client, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """Call a tool that must succeed; its structured result must match the advertised output schema."""
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, result.content[0].text if result.content else result
    assert result.structured_content is not None
    jsonschema.validate(result.structured_content, OPERATIONS[tool].output.schema)
    return result.structured_content


async def refused(client: Client, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """Call a tool that must be refused in-band; returns {code, message, ...}."""
    result = await client.call_tool(tool, arguments)
    assert result.is_error, result.structured_content
    assert result.structured_content is not None
    error: dict[str, Any] = result.structured_content["error"]
    return error


async def unknown_tool(client: Client, tool: str) -> MCPError:
    """Call a tool that tools/list does not show: a JSON-RPC -32602 error, never a tool result."""
    try:
        result = await client.call_tool(tool, {})
    except MCPError as error:
        assert error.code == INVALID_PARAMS, error
        return error
    raise AssertionError(f"{tool} answered a tool result instead of a -32602 protocol error: {result}")
