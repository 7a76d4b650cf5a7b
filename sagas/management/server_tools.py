"""Listing the configured downstream servers' tools as the proxy would connect to them, for the commands that look
at them (`semantic-saga packs`, `packs draft`): one DownstreamManager per server, so a name collision between two
servers hides neither's tools, all at once; a server that does not answer is kept with its status."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import anyio
import mcp.types as types

from sagas.protocols.proxy.downstream import DownstreamManager, DownstreamStatus, Timing
from sagas.protocols.proxy.specs import ProxyConfig, ServerSpec


@dataclass(frozen=True)
class ServerTools:
    spec: ServerSpec
    status: DownstreamStatus
    tools: tuple[types.Tool, ...] | None  # None: the server did not answer


async def list_server_tools(config: ProxyConfig, timing: Timing) -> list[ServerTools]:
    """Every configured server's tools (or its status when down), in configuration order, all at once."""
    found: dict[str, ServerTools] = {}

    async def one(spec: ServerSpec) -> None:
        manager = DownstreamManager(dataclasses.replace(config, servers=(spec,)), timing=timing)
        async with manager.running():
            listing = next(iter(manager.catalog.listings), None)
            found[spec.name] = ServerTools(spec, manager.status()[0], listing.tools if listing else None)

    async with anyio.create_task_group() as group:
        for spec in config.servers:
            group.start_soon(one, spec)
    return [found[spec.name] for spec in config.servers]
