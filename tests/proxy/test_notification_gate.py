"""The pieces of row 5 and row 6 of issue 39 on their own, without processes: the token bucket and the gate in front
of a downstream's read stream (sagas.protocols.proxy.floods), the marking and refusing of a downstream's elicitation
(sagas.protocols.proxy.inbound), and the per-server keys that configure both."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import mcp.types as types
import pytest
from mcp.shared.message import SessionMessage
from mcp_types.jsonrpc import JSONRPCNotification, JSONRPCRequest, JSONRPCResponse

from sagas.protocols.proxy import elicited
from sagas.protocols.proxy.config import ProxyConfigError, parse_proxy_config
from sagas.protocols.proxy.floods import MAX_RELAYING, NotificationGate, TokenBucket
from sagas.protocols.proxy.inbound import RESERVED_PROPERTIES, elicitation_refusal, marked
from sagas.protocols.proxy.specs import ServerSpec


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _notification(method: str, params: dict[str, Any] | None = None) -> SessionMessage:
    return SessionMessage(JSONRPCNotification(jsonrpc="2.0", method=method, params=params))


def _gate(per_second: float = 10, burst: int = 3) -> tuple[NotificationGate, list[str]]:
    asked: list[str] = []

    def relist(kind: str) -> bool:
        due = kind in asked
        asked.append(kind)
        return due

    return NotificationGate("noisy", relist, per_second=per_second, burst=burst), asked


def test_the_bucket_allows_its_burst_then_its_rate():
    clock = Clock()
    bucket = TokenBucket(per_second=4, burst=3, clock=clock)

    assert [bucket.take() for _ in range(4)] == [True, True, True, False]
    clock.now += 0.25  # one token a quarter of a second
    assert [bucket.take() for _ in range(2)] == [True, False]
    clock.now += 60  # an idle minute saves up the burst, not more
    assert sum(bucket.take() for _ in range(10)) == 3


def test_notifications_past_the_burst_are_dropped_and_counted_by_method():
    gate, _ = _gate(per_second=0.001, burst=3)
    log = _notification("notifications/message", {"level": "info", "data": "x"})

    admitted = [gate.admit(log) for _ in range(5)] + [gate.admit(_notification("notifications/hostile/noise"))]

    assert admitted == [True, True, True, False, False, False]
    assert gate.counts.dropped == 3
    assert gate.counts.dropped_by_method == {"notifications/message": 2, "other methods": 1}
    assert gate.counts.describe() == "3 notification(s) dropped over its rate"


def test_requests_and_answers_are_never_dropped():
    gate, _ = _gate(per_second=0.001, burst=1)
    request = SessionMessage(JSONRPCRequest(jsonrpc="2.0", id=1, method="elicitation/create", params={}))
    answer = SessionMessage(JSONRPCResponse(jsonrpc="2.0", id=2, result={}))
    malformed = ValueError("not JSON")

    assert gate.admit(malformed)  # the burst's one token
    assert not gate.admit(malformed)  # a flood of garbage is bounded like notifications
    assert all(gate.admit(message) for message in [request, answer] * 50)
    assert gate.counts.dropped_by_method == {"malformed messages": 1}


def test_list_changed_is_coalesced_into_one_re_listing_never_dropped():
    gate, asked = _gate(per_second=0.001, burst=1)

    kept = [gate.admit(_notification("notifications/tools/list_changed")) for _ in range(500)]
    kept.append(gate.admit(_notification("notifications/prompts/list_changed")))

    assert not any(kept)  # none reaches the SDK: each asked for its re-listing instead
    assert asked.count("tools") == 500 and asked.count("prompts") == 1
    assert gate.counts.dropped == 0 and gate.counts.coalesced == 499  # one re-listing covers the 500
    assert gate.counts.describe() == "499 list_changed coalesced"


def test_a_relay_the_agent_does_not_read_is_dropped_past_the_bound():
    gate, _ = _gate()
    stuck = anyio.Event()
    sent: list[int] = []

    async def never_read() -> None:
        await stuck.wait()  # the agent's connection takes nothing

    async def scenario() -> None:
        async with anyio.create_task_group() as group:
            for _ in range(MAX_RELAYING):
                group.start_soon(gate.relay, never_read, "notifications/message")
            await anyio.wait_all_tasks_blocked()
            await gate.relay(lambda: _append(sent), "notifications/message")  # one too many: dropped at once
            stuck.set()
        await gate.relay(lambda: _append(sent), "notifications/message")  # the agent reads again: relayed

    anyio.run(scenario)

    assert sent == [1]
    assert gate.counts.dropped_by_method == {"notifications/message while the agent's client was not reading": 1}


async def _append(sent: list[int]) -> None:
    sent.append(1)


def test_the_gated_stream_skips_what_the_gate_drops():
    gate, _ = _gate(per_second=0.001, burst=1)
    send, receive = anyio.create_memory_object_stream[SessionMessage | Exception](10)
    answer = SessionMessage(JSONRPCResponse(jsonrpc="2.0", id=7, result={}))
    for message in [_notification("notifications/message"), _notification("notifications/message"), answer]:
        send.send_nowait(message)
    send.close()

    async def read_all() -> list[Any]:
        async with gate.gated(receive) as stream:
            return [item async for item in stream]

    received = anyio.run(read_all)

    assert [item.message for item in received] == [
        _notification("notifications/message").message,
        answer.message,
    ]


def _elicit(properties: dict[str, Any], message: str = "Proceed?") -> types.ElicitRequestFormParams:
    return types.ElicitRequestFormParams(message=message, requested_schema={"type": "object", "properties": properties})


def test_a_downstream_elicitation_is_marked_as_the_servers():
    copied = _elicit({"run_it": {"type": "boolean"}}, message='An AI agent asks to run "purge_cache"')

    shown = marked("crm", copied)

    assert (
        shown.message == '[asked by the MCP server "crm", not by Semantic Saga]\nAn AI agent asks to run "purge_cache"'
    )
    assert shown.requested_schema == copied.requested_schema


def test_a_form_with_the_proxys_own_property_or_a_refusing_server_is_refused():
    relay = ServerSpec(name="crm", transport="stdio", command="crm")
    refuse = ServerSpec(name="crm", transport="stdio", command="crm", elicitation="refuse")

    assert elicitation_refusal(relay, _elicit({"answer": {"type": "string"}})) is None
    reused = elicitation_refusal(relay, _elicit({"approve": {"type": "boolean"}}))
    assert reused is not None and "'approve', which this proxy reserves for its own approval" in reused.message
    refused = elicitation_refusal(refuse, _elicit({"answer": {"type": "string"}}))
    assert refused is not None and 'servers.crm.elicitation: "refuse"' in refused.message
    assert "nobody was asked" in refused.message


def test_the_reserved_properties_are_those_of_the_proxys_approval_form():
    assert set(elicited.SCHEMA["properties"]) == RESERVED_PROPERTIES


def test_the_per_server_keys_are_read_and_checked(tmp_path: Path):
    document = {
        "servers": {
            "chatty": {"command": "x", "notificationsPerSecond": 500, "elicitation": "refuse"},
            "quiet": {"url": "http://127.0.0.1:1/mcp", "notificationsPerSecond": 5, "notificationBurst": 7},
            "plain": {"command": "y"},
        }
    }
    specs = {spec.name: spec for spec in parse_proxy_config(document, tmp_path / "proxy.json").servers}

    assert (specs["chatty"].notifications_per_second, specs["chatty"].notification_burst) == (500.0, 1000)
    assert specs["chatty"].elicitation == "refuse"
    assert (specs["quiet"].notifications_per_second, specs["quiet"].notification_burst) == (5.0, 7)
    assert (specs["plain"].notifications_per_second, specs["plain"].notification_burst) == (100.0, 200)
    assert specs["plain"].elicitation == "relay"

    bad = {"servers": {"s": {"command": "x", "notificationsPerSecond": 0, "elicitation": "ask"}}}
    with pytest.raises(ProxyConfigError) as refused:
        parse_proxy_config(bad, tmp_path / "proxy.json")
    assert any(problem.startswith("servers.s.notificationsPerSecond:") for problem in refused.value.problems)
    assert any(problem.startswith("servers.s.elicitation: 'ask' is not one of") for problem in refused.value.problems)
