"""A real proxy session against the demo world, for the tests that look at one afterwards (undo, the console): the
official `mcp` client as the agent, through the journaled proxy with the demo pack, the demo world over Streamable
HTTP as the downstream; and the world as the downstream itself reports it."""

from __future__ import annotations

from io import StringIO
from pathlib import Path
from typing import Any

import anyio
import httpx
from django.core.management import call_command
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from sagas.models import Saga
from sagas.protocols.proxy.runtime import journaled
from tests.proxy.agent import connect, text
from tests.proxy.conftest import EXAMPLES
from tests.proxy.harness import HttpDownstream, config_file, serve_proxy

Call = tuple[str, dict[str, Any]]
OPEN_I_GATE = {"class": {"I": "allow"}}  # no operator in the undo tests: class I calls go straight through


def world(demo: HttpDownstream) -> dict[str, Any]:
    return dict(httpx.get(demo.url.removesuffix("/mcp") + "/world", timeout=10).json())


def two_contacts(demo: HttpDownstream) -> dict[str, Any]:
    """The empty world with two contacts made directly (not through the proxy): Grace c-1 and Alan c-2."""
    httpx.post(demo.url.removesuffix("/mcp") + "/reset", timeout=10).raise_for_status()
    direct([("create_contact", {"name": "Grace", "email": "grace@example.com"}),
            ("create_contact", {"name": "Alan", "email": "alan@example.com"})], demo)  # fmt: skip
    return world(demo)


def direct(calls: list[Call], demo: HttpDownstream) -> None:
    async def run() -> None:
        async with Client(streamable_http_client(demo.url)) as client:
            for tool, arguments in calls:
                assert not (await client.call_tool(tool, arguments)).is_error

    anyio.run(run)


def command(*args: str) -> str:
    """A command's output. `undo` exits 3 when it finished with calls left in the world (the demo sessions' email
    and transfer): that is its report, not a failure; any other exit raises."""
    out = StringIO()
    try:
        call_command(*args, stdout=out)
    except SystemExit as exited:
        if not (args[0] == "undo" and exited.code == 3):
            raise
    return out.getvalue()


def demo_config(
    directory: Path, demo: HttpDownstream, policy: dict[str, Any] | None = None, packs: list[str] | None = None
) -> Path:
    return config_file(
        directory,
        {"demo": {"url": demo.url}},
        packs=[str(EXAMPLES / "demo_pack.json"), *(packs or [])],
        policy=OPEN_I_GATE if policy is None else policy,
    )


def through_the_proxy(
    tmp_path: Path, demo: HttpDownstream, calls: list[Call], checkpoint: str = "", packs: list[str] | None = None
) -> Saga:
    """One client session through the journaled proxy (the I gate opened), a checkpoint half way when named."""
    with serve_proxy(demo_config(tmp_path, demo, packs=packs), call_path=journaled) as served:

        async def session() -> None:
            async with connect(served.url, "legacy") as client:
                for index, (tool, arguments) in enumerate(calls):
                    if checkpoint and index == len(calls) // 2:
                        await anyio.to_thread.run_sync(command, "checkpoint", checkpoint)
                    answer = await client.call_tool(tool, arguments)
                    assert not answer.is_error, text(answer)

        anyio.run(session)
    return Saga.objects.get(metadata__has_key="proxy")
