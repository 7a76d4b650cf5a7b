"""Sagas as MCP resources on /mcp: reads, templates, tenant scope, subscriptions and logging driven by commits made
in another process (this test process, through the operation table), and completion; both protocol eras."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp.shared.subscriptions import ResourceUpdated
from mcp.types import (
    LoggingMessageNotificationParams,
    ResourceTemplateReference,
    ResourceUpdatedNotification,
    TextResourceContents,
)
from mcp_types.jsonrpc import INVALID_PARAMS

from governance.identity.principal import Principal, local_principal
from sagas.operations.invoke import invoke
from sagas.operations.table import OPERATIONS
from tests.contracts import http_contract, register
from tests.distributed.workers import shared_database_url
from tests.protocols.conftest import ALICE, MALLORY, RunningServer
from tests.protocols.mcp_client import MODES, call

# The handshake-era methods are deprecated in the SDK client (removed in 2026-07-28): these tests use them on purpose.
pytestmark = pytest.mark.filterwarnings(
    "ignore:resources/(un)?subscribe is removed", "ignore:The logging capability is deprecated"
)
ALICE_HERE = Principal("alice", "acme", roles=frozenset({"operator"}), authenticated=True)
ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent  # the virtualenv's bin, where `semantic-saga` is
NOTICE_WITHIN = 20.0  # seconds a committed change may take to reach the subscriber (the watcher polls every 0.5 s)


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def elsewhere(operation: str, **arguments: Any) -> dict[str, Any]:
    """A change committed by this process (not the server's), through the operation table as any surface does."""
    return invoke(OPERATIONS[operation], ALICE_HERE, arguments)


@asynccontextmanager
async def connect(url: str, token: str, mode: str, **callbacks: Any) -> AsyncIterator[Client]:
    headers = {"Authorization": f"Bearer {token}"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30.0, read=120.0)) as http,
        Client(streamable_http_client(url, http_client=http), mode=mode, **callbacks) as client,
    ):
        yield client


def body(contents: list[Any]) -> dict[str, Any]:
    [only] = contents
    assert isinstance(only, TextResourceContents) and only.mime_type == "application/json"
    parsed: dict[str, Any] = json.loads(only.text)
    return parsed


@pytest.mark.parametrize("mode", MODES)
def test_each_resource_reads_what_its_tool_answers(server: RunningServer, mode: str):
    register(http_contract("ship_parcel", "http://127.0.0.1:9", approval_required=True))

    async def scenario() -> None:
        async with connect(server.mcp_url, ALICE, mode) as client:
            caps = client.server_capabilities
            assert caps.resources is not None and caps.resources.subscribe
            assert caps.completions is not None
            sid = (await call(client, "begin_saga", {"metadata": {"order": "7"}}))["id"]
            await call(client, "plan_saga_step", {"saga_id": sid, "action": "ship_parcel", "input": {}, "key": "ship"})
            saga = body((await client.read_resource(f"saga://{sid}")).contents)
            assert saga == await call(client, "get_saga", {"saga_id": sid})
            assert [n["status"] for n in saga["workflow"]["nodes"]] == ["WAITING_APPROVAL"]
            timeline = body((await client.read_resource(f"saga://{sid}/timeline")).contents)
            assert timeline == await call(client, "get_saga_timeline", {"saga_id": sid})
            audit = body((await client.read_resource(f"saga://{sid}/audit")).contents)
            assert [e["event_type"] for e in audit["events"]][:1] == ["SAGA_STARTED"]
            action = body((await client.read_resource("action://ship_parcel")).contents)
            assert action == await call(client, "get_action", {"action": "ship_parcel"})
            templates = (await client.list_resource_templates()).resource_templates
            assert sorted(t.uri_template for t in templates) == [
                "action://{action_id}",
                "saga://{saga_id}",
                "saga://{saga_id}/audit",
                "saga://{saga_id}/timeline",
            ]

    run(scenario())


@pytest.mark.parametrize("mode", MODES)
def test_another_tenants_saga_is_not_found_and_cannot_be_subscribed(server: RunningServer, mode: str):
    sid = elsewhere("begin_saga", metadata={})["id"]
    expected = -32002 if mode == "legacy" else INVALID_PARAMS  # 2026-07-28 standardizes on -32602 (SEP-2164)

    async def scenario() -> None:
        async with connect(server.mcp_url, MALLORY, mode) as client:
            for uri in (f"saga://{sid}", f"saga://{sid}/audit", "saga://not-a-saga", "nothing://here"):
                with pytest.raises(MCPError) as refused:
                    await client.read_resource(uri)
                assert refused.value.code == expected and "not found" in refused.value.error.message.lower()
            listed = (await client.list_resources()).resources
            assert f"saga://{sid}" not in [str(r.uri) for r in listed]
            with pytest.raises(MCPError) as refused:
                if mode == "legacy":
                    await client.subscribe_resource(f"saga://{sid}")
                else:
                    async with client.listen(resource_subscriptions=[f"saga://{sid}"]):
                        pass
            assert refused.value.code == expected

    run(scenario())


def test_resources_list_pages_through_the_tenants_sagas(server: RunningServer):
    made = {elsewhere("begin_saga", metadata={"n": n})["id"] for n in range(55)}

    async def scenario() -> set[str]:
        seen: list[str] = []
        async with connect(server.mcp_url, ALICE, "legacy") as client:
            cursor, pages = None, 0
            while pages < 20:
                page = await client.list_resources(cursor=cursor) if cursor else await client.list_resources()
                seen += [str(r.uri) for r in page.resources]
                pages += 1
                cursor = page.next_cursor
                if cursor is None:
                    break
            assert pages >= 2 and len(seen) == len(set(seen))
        return set(seen)

    assert {f"saga://{sid}" for sid in made} <= run(scenario())


def test_subscribe_hears_a_commit_made_by_another_process_until_unsubscribed(server: RunningServer):
    sid = elsewhere("begin_saga", metadata={})["id"]
    updated: asyncio.Queue[str] = asyncio.Queue()

    async def on_message(message: Any) -> None:
        if isinstance(message, ResourceUpdatedNotification):
            await updated.put(str(message.params.uri))

    async def scenario() -> None:
        async with connect(server.mcp_url, ALICE, "legacy", message_handler=on_message) as client:
            await client.subscribe_resource(f"saga://{sid}/audit")
            await asyncio.to_thread(elsewhere, "checkpoint_saga", saga_id=sid, name="packed")
            assert await asyncio.wait_for(updated.get(), NOTICE_WITHIN) == f"saga://{sid}/audit"
            await client.unsubscribe_resource(f"saga://{sid}/audit")

    run(scenario())


@pytest.mark.parametrize("mode", MODES)
def test_a_saga_uri_spelled_otherwise_is_refused_naming_the_uri_updates_go_to(server: RunningServer, mode: str):
    """An upper-case id names the same saga (resources/read accepts it), but updates are sent under the URI as
    resources/list writes it: a subscription under another spelling would never hear a thing, so it is refused."""
    sid = elsewhere("begin_saga", metadata={})["id"]
    shouted = f"saga://{sid.upper()}/audit"

    async def scenario() -> None:
        async with connect(server.mcp_url, ALICE, mode) as client:
            assert body((await client.read_resource(shouted)).contents)
            with pytest.raises(MCPError) as refused:
                if mode == "legacy":
                    await client.subscribe_resource(shouted)
                else:
                    async with client.listen(resource_subscriptions=[shouted]):
                        pass
            assert refused.value.code == INVALID_PARAMS
            assert f"subscribe to saga://{sid}/audit" in refused.value.error.message

    run(scenario())


def test_listen_hears_a_commit_made_by_another_process(server: RunningServer):
    sid = elsewhere("begin_saga", metadata={})["id"]

    async def scenario() -> None:
        async with (
            connect(server.mcp_url, ALICE, "auto") as client,
            client.listen(resource_subscriptions=[f"saga://{sid}"]) as subscription,
        ):
            assert subscription.honored.resource_subscriptions == [f"saga://{sid}"]
            await asyncio.to_thread(elsewhere, "checkpoint_saga", saga_id=sid, name="packed")
            event = await asyncio.wait_for(anext(subscription), NOTICE_WITHIN)
            assert event == ResourceUpdated(uri=f"saga://{sid}")

    run(scenario())


def test_log_messages_follow_new_audit_events_at_the_level_set(server: RunningServer):
    sid = elsewhere("begin_saga", metadata={})["id"]
    messages: asyncio.Queue[LoggingMessageNotificationParams] = asyncio.Queue()

    async def on_log(params: LoggingMessageNotificationParams) -> None:
        if params.data.get("saga_id") == sid:
            await messages.put(params)

    async def scenario() -> None:
        async with connect(server.mcp_url, ALICE, "legacy", logging_callback=on_log) as client:
            assert client.server_capabilities.logging is not None
            await client.set_logging_level("warning")
            # an info-level event (below the level), then a rollback: warnings
            await asyncio.to_thread(elsewhere, "checkpoint_saga", saga_id=sid, name="packed")
            await asyncio.to_thread(elsewhere, "rollback_saga", saga_id=sid, wait_seconds=0)
            first = await asyncio.wait_for(messages.get(), NOTICE_WITHIN)
            assert first.level == "warning" and first.data["event_type"].startswith("ROLLBACK_")
            assert first.logger == "semantic-saga.audit" and "data" not in first.data

    run(scenario())


@pytest.mark.parametrize("mode", MODES)
def test_completion_offers_the_callers_saga_ids_and_action_ids(server: RunningServer, mode: str):
    register(http_contract("label_parcel", "http://127.0.0.1:9"))
    sid = elsewhere("begin_saga", metadata={})["id"]

    async def scenario() -> None:
        saga_ref = ResourceTemplateReference(type="ref/resource", uri="saga://{saga_id}/timeline")
        action_ref = ResourceTemplateReference(type="ref/resource", uri="action://{action_id}")
        async with connect(server.mcp_url, ALICE, mode) as client:
            mine = (await client.complete(saga_ref, {"name": "saga_id", "value": sid[:8]})).completion
            assert sid in mine.values and len(mine.values) <= 100
            every = (await client.complete(saga_ref, {"name": "saga_id", "value": ""})).completion
            assert len(every.values) <= 100 and every.total is not None and every.total >= len(every.values)
            assert every.has_more == (every.total > len(every.values))
            actions = (await client.complete(action_ref, {"name": "action_id", "value": "label_"})).completion
            assert actions.values == ["label_parcel"] and actions.has_more is False
            with pytest.raises(MCPError) as refused:
                await client.complete(action_ref, {"name": "saga_id", "value": ""})
            assert refused.value.code == INVALID_PARAMS
        async with connect(server.mcp_url, MALLORY, mode) as client:
            theirs = (await client.complete(saga_ref, {"name": "saga_id", "value": sid[:8]})).completion
            assert sid not in theirs.values

    run(scenario())


@pytest.mark.parametrize("mode", MODES)
def test_stdio_serves_the_resources_and_their_updates(tmp_path: Path, mode: str):
    local = local_principal("cli")
    sid = invoke(OPERATIONS["begin_saga"], local, {"metadata": {}})["id"]
    env = {**os.environ, "DATABASE_URL": shared_database_url(), "SAGA_FILE_ROOT": str(tmp_path)}
    params = StdioServerParameters(command=str(BIN / "semantic-saga"), args=["mcp"], env=env, cwd=str(ROOT))
    updated: asyncio.Queue[str] = asyncio.Queue()
    checkpoint = {"saga_id": sid, "name": "packed"}

    async def on_message(message: Any) -> None:
        if isinstance(message, ResourceUpdatedNotification):
            await updated.put(str(message.params.uri))

    async def scenario() -> None:
        async with Client(stdio_client(params), mode=mode, message_handler=on_message) as client:
            assert body((await client.read_resource(f"saga://{sid}")).contents)["id"] == sid
            if mode == "legacy":
                await client.subscribe_resource(f"saga://{sid}")
                await asyncio.to_thread(invoke, OPERATIONS["checkpoint_saga"], local, checkpoint)
                assert await asyncio.wait_for(updated.get(), NOTICE_WITHIN) == f"saga://{sid}"
                return
            async with client.listen(resource_subscriptions=[f"saga://{sid}"]) as subscription:
                await asyncio.to_thread(invoke, OPERATIONS["checkpoint_saga"], local, checkpoint)
                event = await asyncio.wait_for(anext(subscription), NOTICE_WITHIN)
                assert event == ResourceUpdated(uri=f"saga://{sid}")

    run(scenario())
