"""Limits with clear answers, against a hostile server, over stdio and over HTTP: a 50 MB answer is never read past
SAGA_PROXY_MAX_RESULT_BYTES (the agent is told, the proxy's memory does not follow it, the connection stays
usable); a call that hangs ends at the server's `timeoutMs`, recorded uncertain; one agent cannot fill the approval
queue (SAGA_PROXY_MAX_HELD_CALLS); a server silent at start is reported down after its `connectTimeoutMs` while the
others serve."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from django.db import connections
from mcp.shared.exceptions import MCPError

from governance.identity.principal import Principal
from sagas import coordinator
from sagas.models import Node, Step
from tests.proxy.agent import text, tool_names
from tests.proxy.guardian import (
    TRANSPORTS,
    Guarded,
    guarded_proxy,
    hostile,
    hostile_over_http,
    peak_memory_bytes,
    poll,
    proxy_pid,
)

pytestmark = pytest.mark.django_db(transaction=True)
LIMIT = 1024 * 1024
# What the proxy may grow by while a 50 MB answer streams past it: its bounded line (LIMIT), the parser's copies
# and the allocator's slack; a whole 50 MB answer read into memory could not fit.
GROWTH_BOUND = 24 * 1024 * 1024


@contextlib.contextmanager
def _downstream(transport: str, tmp_path: Path, *flags: str) -> Iterator[dict[str, Any]]:
    """The hostile server as the proxy reaches it: started by the proxy over stdio, or served over HTTP."""
    called = tmp_path / "called.jsonl"
    if transport == "stdio":
        yield hostile(*flags, called=called)
        return
    with hostile_over_http(*flags, called=called) as entry:
        yield entry


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_50_mb_answer_is_not_read_past_the_limit(transport: str, tmp_path: Path):
    env = {"SAGA_PROXY_MAX_RESULT_BYTES": str(LIMIT)}
    with (
        _downstream(transport, tmp_path) as server,
        guarded_proxy(transport, tmp_path, {"h": server}, env=env) as guarded,
    ):

        async def scenario() -> tuple[Any, Any, int, int]:
            async with guarded.agent() as client:
                await client.call_tool("get_status", {})
                before = peak_memory_bytes(proxy_pid(guarded))
                huge = await client.call_tool("huge_result", {"megabytes": 50})
                after = peak_memory_bytes(proxy_pid(guarded))
                return huge, await client.call_tool("get_status", {}), before, after

        huge, next_call, before, after = anyio.run(scenario)

    assert huge.is_error and "more than this proxy passes on to an agent" in text(huge)
    assert "SAGA_PROXY_MAX_RESULT_BYTES" in text(huge)
    assert after - before < GROWTH_BOUND, f"the proxy grew by {(after - before) >> 20} MB"
    assert not next_call.is_error  # the connection to the server is still usable
    step = Step.objects.get(action="proxy.h.huge_result")
    assert step.status == "FAILED" and step.error["code"] == "RESULT_TOO_LARGE"
    assert not step.uncertain_outcome  # a read: it changed nothing


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_call_that_hangs_ends_at_the_servers_timeout_recorded_uncertain(transport: str, tmp_path: Path):
    with (
        _downstream(transport, tmp_path) as server,
        guarded_proxy(transport, tmp_path, {"h": {**server, "timeoutMs": 1500}}) as guarded,
    ):

        async def scenario() -> Any:
            async with guarded.agent() as client:
                hung = await client.call_tool("hang", {"job": "forever"})
                return hung, await client.call_tool("get_status", {})

        hung, next_call = anyio.run(scenario)

    assert hung.is_error and "did not answer within 1.5s" in text(hung) and "may or may not have acted" in text(hung)
    assert not next_call.is_error
    step = Step.objects.get(action="proxy.h.hang")
    assert step.status == "FAILED" and step.uncertain_outcome and step.error["code"] == "ANSWER_LOST"
    assert [call["tool"] for call in guarded.calls()] == ["hang", "get_status"]


def _flood(guarded: Guarded, calls: int) -> list[Any]:
    async def scenario() -> list[Any]:
        answers: list[Any] = []
        async with guarded.agent() as client, anyio.create_task_group() as group:

            async def call(n: int) -> None:
                answers.append(await client.call_tool("purge_cache", {"scope": f"s{n}"}))

            for n in range(calls):
                group.start_soon(call, n)
        return answers

    return anyio.run(scenario)


def _deny_the_held_calls_once(refused: int) -> None:
    """An operator of the session's tenant denies every held call, once `refused` calls were turned away: the
    queue stays full for the whole flood however slow the machine, with no timeout racing it."""
    poll(lambda: Step.objects.filter(error__code="HELD_CALLS_LIMIT").count() >= refused, f"{refused} refusals")
    for node in Node.objects.filter(status="WAITING_APPROVAL").select_related("saga"):
        olga = Principal("olga", node.saga.tenant_id, roles=frozenset({"operator"}), authenticated=True)
        coordinator.node_approve(actor=olga, saga_id=node.saga_id, node_id=node.id, approved=False, reason="flood")
    connections.close_all()


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_one_agent_cannot_fill_the_approval_queue(transport: str, tmp_path: Path):
    policy = {"confirmTimeoutMs": 600_000}
    with guarded_proxy(transport, tmp_path, policy=policy, env={"SAGA_PROXY_MAX_HELD_CALLS": "20"}) as guarded:
        operator = threading.Thread(target=_deny_the_held_calls_once, args=(180,))
        operator.start()
        answers = _flood(guarded, 200)
        operator.join()

    texts = [text(answer) for answer in answers]
    limited = [t for t in texts if "SAGA_PROXY_MAX_HELD_CALLS" in t]
    denied = [t for t in texts if "olga denied it" in t]
    assert len(answers) == 200 and all(answer.is_error for answer in answers)
    assert len(denied) == 20 and len(limited) == 180
    assert "20 calls of " in limited[0] and "already wait for a person" in limited[0]
    assert Node.objects.count() == 20 and guarded.calls() == []
    assert Step.objects.filter(error__code="HELD_CALLS_LIMIT").count() == 180


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_server_silent_at_start_is_reported_down_while_the_others_serve(transport: str, tmp_path: Path):
    servers = {"h": hostile(), "mute": {**hostile("--silent"), "connectTimeoutMs": 1000, "prefix": "mute"}}
    with guarded_proxy(transport, tmp_path, servers) as guarded:

        async def scenario() -> tuple[list[str], Any]:
            async with guarded.agent() as client:
                names = await tool_names(client)
                with pytest.raises(MCPError):
                    await client.call_tool("mute__get_status", {})
                return names, await client.call_tool("get_status", {})

        names, status = anyio.run(scenario)
        log = guarded.log.read_text() if guarded.log else ""

    assert "get_status" in names and not any(name.startswith("mute__") for name in names)
    assert not status.is_error
    assert 'downstream "mute"' in log and "DOWN (no answer in time)" in log and "next attempt in" in log
