"""Assembling a running proxy: the configuration, the downstream manager, the call path and the MCP server.

Both ways of serving use this: `semantic-saga proxy` (stdio, the local operator) and `semantic-saga serve`
(Streamable HTTP at /proxy/mcp when SAGA_PROXY_CONFIG names a configuration).
"""

from __future__ import annotations

import contextlib
import logging
import sys
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

import anyio

from governance.identity.principal import Principal
from sagas.protocols.proxy.calls import CallPath, ForwardingCallPath
from sagas.protocols.proxy.downstream import DownstreamManager, Timing
from sagas.protocols.proxy.durable import DurableCallPath
from sagas.protocols.proxy.server import ProxyServer, build_proxy_server
from sagas.protocols.proxy.specs import ProxyConfig

logger = logging.getLogger("sagas.protocols.proxy")
CallPathFactory = Callable[[DownstreamManager, ProxyConfig], CallPath]
# While a proxy runs, a thread that holds the interpreter (a journal thread writing a step) gives it up to the event
# loop after at most this long once the loop's I/O is ready, instead of Python's default 5 ms: every proxied call
# waits on the loop, and reads' journal lines are written on a thread while calls are answered.
SWITCH_INTERVAL_SECONDS = 0.0005


def forwarding(downstreams: DownstreamManager, config: ProxyConfig) -> CallPath:
    """Straight through, nothing journaled (tests of the transport alone)."""
    return ForwardingCallPath(downstreams, preview=config.preview)


def journaled(downstreams: DownstreamManager, config: ProxyConfig) -> CallPath:
    """Every call a durable step of its session's saga (sagas.protocols.proxy.durable): what both ways of serving
    use."""
    return DurableCallPath(downstreams, config)


@dataclass(frozen=True)
class Proxy:
    config: ProxyConfig
    downstreams: DownstreamManager
    server: ProxyServer
    call_path: CallPath

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """Connected to the downstreams for the block; the call path is released when it ends. What the configuration
        says that the operator should know (accepted but unused keys, rules to reconsider) is logged first."""
        for note in self.config.notes:
            logger.warning("%s: %s", self.config.path, note)
        tasks = getattr(self.call_path, "tasks", None)  # the durable path's MCP tasks run in the background
        switch_interval = sys.getswitchinterval()
        sys.setswitchinterval(min(switch_interval, SWITCH_INTERVAL_SECONDS))
        try:
            async with self.downstreams.running(), tasks.running() if tasks else contextlib.nullcontext():
                yield
        finally:
            with anyio.CancelScope(shield=True):
                await self.call_path.aclose()
            sys.setswitchinterval(switch_interval)


def build_proxy(
    config: ProxyConfig,
    principal_for_request: Callable[[], Principal],
    *,
    call_path: CallPathFactory = forwarding,
    timing: Timing | None = None,
) -> Proxy:
    """Everything but running: `async with proxy.running():` connects, then serve `proxy.server`."""
    downstreams = DownstreamManager(config, timing=timing)
    path = call_path(downstreams, config)
    server = build_proxy_server(downstreams, path, principal_for_request)
    return Proxy(config, downstreams, server, path)
