"""Downstreams come and go: a collision among them refuses to start naming the prefix to add; a server that is down
at start is reported and retried while the others are served; a server that goes away is reported and calls to it
are not sent; secret references reach the server and nothing else."""

from __future__ import annotations

import asyncio
import json
import os
import time
from pathlib import Path

import anyio
import pytest

from sagas.protocols.proxy.catalog import NameCollision
from sagas.protocols.proxy.config import load_proxy_config
from sagas.protocols.proxy.connection import DownstreamStatus
from sagas.protocols.proxy.downstream import DownstreamManager
from tests.distributed.workers import free_port
from tests.proxy.agent import WAIT_SECONDS, Agent, connect, text, tool_names
from tests.proxy.harness import DEMO, FAST, TINY, HttpDownstream, config_file, serve_proxy, stdio

DEMO_TOOLS = 10


def _status(served_or_manager: DownstreamManager, server: str) -> DownstreamStatus:
    return next(status for status in served_or_manager.status() if status.server == server)


def _wait_until(predicate: object, what: str) -> None:
    deadline = time.monotonic() + WAIT_SECONDS
    while not predicate():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"timed out waiting until {what}"
        time.sleep(0.05)


def test_two_servers_with_the_same_tool_name_refuse_to_start_naming_the_prefix(tmp_path: Path):
    config = load_proxy_config(config_file(tmp_path, {"demo": stdio(DEMO), "tiny": stdio(TINY)}))

    async def start() -> None:
        async with DownstreamManager(config, timing=FAST).running():
            raise AssertionError("the proxy started despite the collision")

    with pytest.raises(NameCollision) as refused:
        asyncio.run(start())

    message = str(refused.value)
    assert 'the servers "demo" and "tiny" both expose the tool \'send_email\'' in message
    assert 'add "prefix": "tiny" to the server "tiny"' in message
    assert "exposed as prefix__name" in message


def test_a_server_down_at_start_is_reported_retried_and_then_served(tmp_path: Path):
    tiny = HttpDownstream(TINY, free_port())
    servers = {"demo": stdio(DEMO), "tiny": {"url": tiny.url, "prefix": "tiny"}}
    observer = Agent()

    with serve_proxy(config_file(tmp_path, servers)) as served:
        # Between two of its retries it reads "down"; during one, "connecting" (a status is read at one moment).
        _wait_until(lambda: _status(served.proxy.downstreams, "tiny").state == "down", "tiny reported down")
        down = _status(served.proxy.downstreams, "tiny")

        async def scenario() -> tuple[list[str], list[str], str]:
            async with connect(served.url, "legacy", observer) as client:
                before = await tool_names(client)
                assert "ConnectError" in down.problem, down
                await anyio.to_thread.run_sync(tiny.start)  # the server comes up later
                await observer.wait_for("notifications/tools/list_changed")
                after = await tool_names(client)
                sent = await client.call_tool("tiny__send_email", {"to": "late@example.com", "subject": "hi"})
                return before, after, text(sent)

        try:
            before, after, answer = asyncio.run(scenario())
        finally:
            tiny.stop()

    # then: the demo was served all along; tiny joined once it answered, and was retried, not given up on
    assert len(before) == DEMO_TOOLS and not any(name.startswith("tiny__") for name in before)
    assert "tiny__send_email" in after and after[:DEMO_TOOLS] == before
    assert json.loads(answer)["to"] == "late@example.com"
    assert down.state == "connected" and down.attempts >= 2


def test_a_server_that_goes_away_is_reported_and_calls_to_it_are_not_sent(tmp_path: Path):
    tiny = HttpDownstream(TINY, free_port()).start()
    servers = {"demo": stdio(DEMO), "tiny": {"url": tiny.url, "prefix": "tiny"}}
    try:
        with serve_proxy(config_file(tmp_path, servers)) as served:
            status = _status(served.proxy.downstreams, "tiny")
            assert status.state == "connected"
            tiny.stop()
            _wait_until(lambda: status.state != "connected", "the proxy noticed tiny is gone")

            async def scenario() -> tuple[bool, str, dict[str, object]]:
                async with connect(served.url, "legacy") as client:
                    result = await client.call_tool("tiny__send_email", {"to": "gone@example.com", "subject": "s"})
                    return result.is_error, text(result), dict(result.meta or {})

            is_error, message, meta = asyncio.run(scenario())
    finally:
        tiny.stop()

    assert is_error
    assert message.startswith('tiny__send_email did not run: the MCP server "tiny" is not connected')
    assert "Nothing was sent to that server, so nothing changed" in message
    assert meta["io.semantic-saga/proxy"]["outcome"] == "not_sent"  # type: ignore[index]


def test_a_server_that_connects_later_with_a_colliding_name_is_kept_out(tmp_path: Path):
    tiny = HttpDownstream(TINY, free_port())
    servers = {"demo": stdio(DEMO), "tiny": {"url": tiny.url}}  # no prefix: its send_email collides
    with serve_proxy(config_file(tmp_path, servers)) as served:
        status = _status(served.proxy.downstreams, "tiny")
        try:
            tiny.start()
            _wait_until(lambda: status.state == "connected" and status.problem, "tiny connected and was refused")
        finally:
            tiny.stop()
        catalog = served.proxy.downstreams.catalog

    assert len(catalog.tools) == DEMO_TOOLS and catalog.tools["send_email"].server == "demo"
    assert '"prefix": "tiny"' in status.problem


def test_secret_references_are_resolved_into_the_server_environment_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    secret = "s3cret-value-for-the-tiny-server"
    monkeypatch.setenv("PROXY_TEST_SECRET", secret)
    servers = {
        "tiny": stdio(TINY, prefix="tiny", env={"TINY_TOKEN": {"secret_ref": "env://PROXY_TEST_SECRET"}}),
        "locked": stdio(TINY, prefix="locked", env={"TINY_TOKEN": {"secret_ref": "env://PROXY_TEST_MISSING"}}),
    }
    with serve_proxy(config_file(tmp_path, servers)) as served:

        async def scenario() -> str:
            async with connect(served.url, "legacy") as client:
                return text(await client.call_tool("tiny__env_has", {"name": "TINY_TOKEN"}))

        answer = json.loads(asyncio.run(scenario()))
        statuses = served.proxy.downstreams.status()

    locked = next(status for status in statuses if status.server == "locked")
    assert answer == {"set": True, "length": len(secret)}
    assert locked.state == "down" and "Secret env://PROXY_TEST_MISSING is unavailable" in locked.problem
    assert all(secret not in repr(status) for status in statuses)
    assert os.environ.get("TINY_TOKEN") is None  # resolved for the child process, not into ours
