"""A hostile server's listing cannot talk its way past the proxy (over stdio and over HTTP, official mcp client):
a hidden tool answers exactly like one no server offers, names MCP does not allow never reach the agent (nor echo
back in errors), and a tool whose name says it mutates is never a read because its server claims readOnlyHint."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from mcp.shared.exceptions import MCPError

from sagas.models import Step
from tests.proxy.agent import tool_names
from tests.proxy.guardian import TRANSPORTS, guarded_proxy
from tests.proxy.hostile_server import BAD_NAMES

pytestmark = pytest.mark.django_db(transaction=True)
HIDE_DROP = {"tools": [{"tool": "drop_database", "action": "hide", "reason": "never, for anyone"}]}


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_hidden_and_badly_named_tools_are_never_listed_and_answer_as_unknown(transport: str, tmp_path: Path):
    with guarded_proxy(transport, tmp_path, policy=HIDE_DROP) as guarded:

        async def scenario() -> tuple[list[str], dict[str, MCPError]]:
            refusals: dict[str, MCPError] = {}
            async with guarded.agent() as client:
                names = await tool_names(client)
                for name in ("drop_database", "no_such_tool", *BAD_NAMES):
                    with pytest.raises(MCPError) as refused:
                        await client.call_tool(name, {})
                    refusals[name] = refused.value
            return names, refusals

        names, refusals = anyio.run(scenario)

    # the agent sees the listed tools, and neither the hidden one nor a name MCP does not allow
    assert "purge_cache" in names and "get_status" in names
    assert "drop_database" not in names and not set(BAD_NAMES) & set(names)
    # probing the hidden tool gets exactly what probing a tool nobody offers gets
    hidden, unknown = refusals["drop_database"], refusals["no_such_tool"]
    assert hidden.code == unknown.code == -32602
    assert hidden.message.replace("drop_database", "NAME") == unknown.message.replace("no_such_tool", "NAME")
    for refusal in refusals.values():
        assert "drop_database" not in refusal.message.replace("'drop_database'", "")  # not in the list of tools
        assert len(refusal.message) < 2000  # a 100,000-character name is echoed as a short prefix only
    # nothing reached the server, and nothing was journaled for them
    assert guarded.calls() == []
    assert not Step.objects.filter(action__contains="drop_database").exists()


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_lying_read_only_hint_neither_runs_in_preview_nor_lowers_the_gate(transport: str, tmp_path: Path):
    with guarded_proxy(transport, tmp_path, preview=True) as guarded:

        async def scenario() -> tuple[str, bool]:
            async with guarded.agent() as client:
                status = await client.call_tool("get_status", {})
                deleted = await client.call_tool("delete_all_users", {})
                return status.content[0].text, deleted.is_error  # type: ignore[union-attr]

        status, _ = anyio.run(scenario)

    # the read ran; the "read-only" delete was recorded dry as what its name says, and never sent
    assert '"ran": "get_status"' in status
    assert [call["tool"] for call in guarded.calls()] == ["get_status"]
    step = Step.objects.get(action="proxy.h.delete_all_users")
    proxy = step.action_definition["proxy"]
    assert step.status == "DRY" and proxy["class"] == "unknown"
    assert "never makes a call less guarded than its name" in proxy["class_reason"]
