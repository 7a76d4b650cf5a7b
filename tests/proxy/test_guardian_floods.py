"""Issue 39, row 5: a downstream that floods notifications (log messages, progress, list_changed, resources/updated,
methods nobody knows) as fast as it can write, through the stdio proxy and through `serve`. The proxy keeps answering
a read on another server meanwhile, drops what is past the server's rate and says so in the server's status and in
its log once per interval (not once per notification), and coalesces list_changed into re-listings (none is lost).

How fast anything went is the bench's business (bench/proxy_flood.py): nothing here is timed."""

from __future__ import annotations

import contextlib
import json
import math
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from sagas.protocols.proxy.floods import REPORT_SECONDS
from tests.proxy.agent import Agent, connect, text
from tests.proxy.guardian import TRANSPORTS, Guarded, guarded_proxy, hostile, hostile_over_http, poll
from tests.proxy.harness import config_file, serve_proxy

pytestmark = pytest.mark.django_db(transaction=True)
FLOOD = 4000  # notifications the flooding server sends (all five kinds in turn)
# A low limit, so the proxy drops most of the flood however slowly this machine sends it.
LIMITS = {"notificationsPerSecond": 20, "notificationBurst": 40}
DROPPED = re.compile(r'downstream "h" sent notifications faster than its limit .*?: (\d+) dropped .*?, (\d+) since')


@contextlib.contextmanager
def _flooding(transport: str, tmp_path: Path, *flags: str) -> Iterator[dict[str, Any]]:
    """The flooding server "h" as the proxy reaches it: started by the proxy over stdio, or served over HTTP."""
    called = tmp_path / "called.jsonl"
    if transport == "stdio":
        yield {**hostile("--flood", "all", *flags, called=called), **LIMITS}
        return
    with hostile_over_http("--flood", "all", *flags, called=called) as entry:
        yield {**entry, **LIMITS}


def _calm() -> dict[str, Any]:
    return {**hostile(), "prefix": "calm"}


async def _flood_while_reading(client: Any) -> tuple[dict[str, Any], list[Any]]:
    """The flood's answer, and the reads on the calm server made while it lasted (at least one)."""
    flooded: list[Any] = []
    reads: list[Any] = []

    async def flood() -> None:
        flooded.append(await client.call_tool("flood", {"count": FLOOD}))

    async with anyio.create_task_group() as group:
        group.start_soon(flood)
        while not flooded:
            reads.append(await client.call_tool("calm__get_status", {}))
    return json.loads(text(flooded[0])), reads


def _drop_reports(guarded: Guarded) -> list[tuple[int, int]]:
    """(dropped in the interval, dropped since start) of each of the proxy's reports on "h"."""
    log = guarded.log.read_text() if guarded.log else ""
    return [(int(m.group(1)), int(m.group(2))) for m in DROPPED.finditer(log)]


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_flood_is_bounded_and_the_other_server_keeps_answering(transport: str, tmp_path: Path):
    agent = Agent()
    began = time.monotonic()
    with (
        _flooding(transport, tmp_path) as flooding,
        guarded_proxy(transport, tmp_path, {"h": flooding, "calm": _calm()}) as guarded,
    ):

        async def scenario() -> tuple[dict[str, Any], list[Any]]:
            async with guarded.agent(agent=agent) as client:
                return await _flood_while_reading(client)

        flooded, reads = anyio.run(scenario)
        # the reports come at the first drop, then once per interval (and as the proxy stops): the last says what the
        # whole flood cost
        reports = poll(lambda: [r for r in _drop_reports(guarded) if r[1] >= FLOOD // 2], "the flood's report")
        lines = len(_drop_reports(guarded))
        seconds = time.monotonic() - began

    assert reads and not any(read.is_error for read in reads)  # the other server answered throughout
    assert flooded["sent"] >= FLOOD
    # most of the flood never reached the agent: the relayed log messages are what the rate let through
    assert len(agent.logs) < flooded["per_kind"] // 2
    # said once per interval, never once per notification
    assert lines <= 1 + math.ceil(seconds / REPORT_SECONDS) and reports[-1][1] > 100 * lines
    # every list_changed was taken into account: the tools were listed again after the last one, and far fewer
    # times than the server said they changed
    assert flooded["relisted_after_the_last"] and flooded["relisted"] < flooded["per_kind"] // 10


def test_a_flood_with_no_call_in_flight_is_bounded_too(tmp_path: Path):
    # The server floods from the moment the proxy connects: its log messages go to the proxy's own log, at its rate.
    flags = ("--flood-background", "--flood-seconds", "3")
    servers = {"h": {**hostile("--flood", "all", *flags, called=tmp_path / "called.jsonl"), **LIMITS}, "calm": _calm()}
    with guarded_proxy("stdio", tmp_path, servers) as guarded:

        async def scenario() -> list[Any]:
            async with guarded.agent() as client:
                reads = [await client.call_tool("calm__get_status", {})]
                poll(lambda: any("background_flood" in line for line in guarded.calls()), "the end of the flood")
                return [*reads, await client.call_tool("calm__get_status", {})]

        reads = anyio.run(scenario)
        reports = poll(lambda: [r for r in _drop_reports(guarded) if r[1] >= 100], "the flood's report")
        log = guarded.log.read_text() if guarded.log else ""

    sent = next(line for line in guarded.calls() if "background_flood" in line)
    assert not any(read.is_error for read in reads)
    assert reports and log.count("downstream h logged") < sent["per_kind"] // 2


def test_the_servers_status_counts_what_its_flood_cost(tmp_path: Path):
    servers = {"h": {**hostile("--flood", "all"), **LIMITS}, "calm": _calm()}
    with serve_proxy(config_file(tmp_path, servers)) as served:

        async def scenario() -> dict[str, Any]:
            async with connect(served.url, "legacy") as client:
                flooded, _ = await _flood_while_reading(client)
                return flooded

        flooded = anyio.run(scenario)
        status = {s.server: s for s in served.proxy.downstreams.status()}

    counts = status["h"].notifications
    # everything but list_changed spends the rate: four kinds of five
    assert counts.dropped >= flooded["per_kind"] * 4 - 40 - 20 * 60
    assert counts.dropped_by_method["notifications/message"] > 0 and counts.dropped_by_method["notifications/progress"]
    assert counts.dropped_by_method["notifications/resources/updated"] > 0
    assert counts.dropped_by_method["other methods"] > 0  # methods nobody defines, under one name
    assert "notifications/tools/list_changed" not in counts.dropped_by_method  # coalesced, never dropped
    # each re-listing covered all the list_changed before it: one started during the flood per `relisted`, and at
    # most two more the downstream had not counted when it answered (one on its way to it, one queued behind it)
    assert counts.coalesced >= flooded["per_kind"] - flooded["relisted"] - 2
    assert f"{counts.dropped} notification(s) dropped over its rate" in status["h"].describe()
    assert "list_changed coalesced" in status["h"].describe()
    assert status["calm"].notifications.dropped == 0 and "dropped" not in status["calm"].describe()
