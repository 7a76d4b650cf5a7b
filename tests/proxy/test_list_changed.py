"""A downstream's notifications/tools/list_changed rebuilds the proxy's table and is passed on to the agents in
both eras; a rebuild that fails keeps the previous table."""

from __future__ import annotations

import asyncio
import time
import uuid

import anyio
import pytest
from mcp.shared.exceptions import MCPError
from mcp_types.jsonrpc import INVALID_PARAMS

from tests.proxy.agent import WAIT_SECONDS, Agent, connect, text, tool_names
from tests.proxy.harness import ServedProxy


def _new_name() -> str:
    return f"extra_{uuid.uuid4().hex[:8]}"


def test_list_changed_rebuilds_the_table_and_reaches_a_connected_agent(served: ServedProxy):
    observer, name = Agent(), _new_name()

    async def scenario() -> tuple[list[str], str]:
        async with connect(served.url, "legacy", observer) as watching, connect(served.url, "legacy") as acting:
            await acting.call_tool("tiny__add_tool", {"name": name})
            await observer.wait_for("notifications/tools/list_changed")
            ran = await watching.call_tool(f"tiny__{name}", {})
            return await tool_names(watching), text(ran)

    names, answer = asyncio.run(scenario())

    assert f"tiny__{name}" in names
    assert answer == f'{{"ran": "{name}"}}'


def test_list_changed_reaches_a_stateless_agent_through_its_listen_stream(served: ServedProxy):
    name = _new_name()

    async def scenario() -> list[str]:
        async with connect(served.url, "auto") as client, client.listen(tools_list_changed=True) as subscription:
            await client.call_tool("tiny__add_tool", {"name": name})
            with anyio.fail_after(WAIT_SECONDS):
                event = await subscription.__anext__()
            assert type(event).__name__ == "ToolsListChanged"
            return await tool_names(client)

    assert f"tiny__{name}" in asyncio.run(scenario())


def test_a_failed_rebuild_keeps_the_previous_table(served: ServedProxy):
    tiny = next(status for status in served.proxy.downstreams.status() if status.server == "tiny")

    async def scenario() -> tuple[list[str], list[str], bool]:
        async with connect(served.url, "legacy") as client:
            before = await tool_names(client)
            # when: tiny says its tools changed, then fails to list them
            await client.call_tool("tiny__break_listing", {})
            deadline = time.monotonic() + WAIT_SECONDS
            while "broken on purpose" not in tiny.listing_problem:
                assert time.monotonic() < deadline, "the failed re-listing was never reported"
                await anyio.sleep(0.05)
            after = await tool_names(client)
            still_served = not (await client.call_tool("tiny__send_email", {"to": "x@y.z", "subject": "s"})).is_error
            return before, after, still_served

    before, after, still_served = asyncio.run(scenario())

    # then: the same table, still served; the problem is in the status (and the log)
    assert after == before
    assert still_served
    assert tiny.state == "connected"


def test_a_cursor_from_before_a_change_is_refused(served: ServedProxy):
    observer = Agent()

    async def scenario() -> MCPError:
        async with connect(served.url, "legacy", observer) as client:
            stale = (await client.list_tools()).next_cursor
            await client.call_tool("tiny__add_tool", {"name": _new_name()})
            await observer.wait_for("notifications/tools/list_changed")
            with pytest.raises(MCPError) as refused:
                await client.list_tools(cursor=stale)
            return refused.value

    error = asyncio.run(scenario())

    assert error.code == INVALID_PARAMS
    assert "The list changed since this cursor was issued" in error.message
