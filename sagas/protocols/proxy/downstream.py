"""The proxy's downstream servers: one long-lived session each (sagas.protocols.proxy.connection) and the
catalog built from what they offer (sagas.protocols.proxy.catalog).

`DownstreamManager.running()` connects to every server at once and waits for each first attempt: servers that
answered are in the catalog, servers that did not are reported and retried in the background. A name collision
among the servers that answered refuses to start (NameCollision says which prefix to add). Afterwards each change
(a server connecting later, a list_changed, a client's fresh resources/list) rebuilds the catalog; a rebuild that
fails (a collision, a listing error) keeps the previous catalog and says why in the log and the server's status.
Listeners hear which kinds changed, so the proxy server can pass list_changed on to its clients.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, cast

import anyio
import mcp.types as types

from sagas.protocols.proxy.catalog import Catalog, NameCollision, ServerListing
from sagas.protocols.proxy.connection import DownstreamConnection, Timing
from sagas.protocols.proxy.downstream_faults import DownstreamLost, DownstreamTimedOut, DownstreamUnavailable
from sagas.protocols.proxy.listing import Kind
from sagas.protocols.proxy.relay import ClientRelay, RelayRouter
from sagas.protocols.proxy.result_cap import ResultTooLarge
from sagas.protocols.proxy.specs import ProxyConfig
from sagas.protocols.proxy.status import DownstreamStatus

logger = logging.getLogger("sagas.protocols.proxy")

ChangeListener = Callable[[frozenset[str]], Awaitable[None]]

__all__ = [
    "ChangeListener",
    "DownstreamLost",
    "DownstreamManager",
    "DownstreamStatus",
    "DownstreamTimedOut",
    "DownstreamUnavailable",
    "ResultTooLarge",
    "Timing",
]


class DownstreamManager:
    def __init__(self, config: ProxyConfig, *, timing: Timing | None = None) -> None:
        self.config = config
        self.router = RelayRouter()
        self._order = [spec.name for spec in config.servers]
        self._connections = {
            spec.name: DownstreamConnection(spec, self.router, self._listing_changed, timing or Timing())
            for spec in config.servers
        }
        self._catalog = Catalog()
        self._listeners: list[ChangeListener] = []
        # Each server's first listing as it answered it: before the first catalog is built a server may already have
        # been listed again (it said list_changed at once), and its first listing is its first use (trust.py).
        self._first_listings: dict[str, ServerListing] = {}
        self._started = False
        self._warned: set[tuple[str, str]] = set()  # badly named tools already reported (server, name)

    @property
    def catalog(self) -> Catalog:
        """The current snapshot (replaced, never mutated, by a rebuild)."""
        return self._catalog

    def status(self) -> list[DownstreamStatus]:
        return [self._connections[name].status for name in self._order]

    def subscribe(self, listener: ChangeListener) -> None:
        """`listener(kinds)` runs after each rebuild that changed something: "tools", "prompts", "resources",
        "instructions"."""
        self._listeners.append(listener)

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[DownstreamManager]:
        """Serve the downstreams for the block; NameCollision (before the block runs) when two connected servers
        expose the same name."""
        collision: NameCollision | None = None
        async with anyio.create_task_group() as group:
            for connection in self._connections.values():
                group.start_soon(connection.supervise)
            for connection in self._connections.values():
                await connection.first_attempt.wait()
            try:
                self._catalog = self._checked(Catalog.build(c.listing for c in self._connections.values() if c.listing))
            except NameCollision as clash:
                collision = clash
                group.cancel_scope.cancel()
            else:
                self._started = True
                connected = sum(status.state == "connected" for status in self.status())
                logger.info("proxy started: %d of %d downstream server(s) connected", connected, len(self._order))
                await self._tell(frozenset({"tools", "prompts", "resources", "instructions"}))
                try:
                    yield self
                finally:
                    group.cancel_scope.cancel()
        if collision is not None:
            raise collision

    async def _tell(self, kinds: frozenset[str]) -> None:
        for listener in list(self._listeners):
            await listener(kinds)

    async def _listing_changed(
        self, connection: DownstreamConnection, listing: ServerListing, kinds: frozenset[str]
    ) -> None:
        self._first_listings.setdefault(listing.spec.name, listing)
        if not self._started:
            return  # the first catalog is built from every first attempt at once
        before = self._catalog
        try:
            after = before.with_listing(listing, self._order)
        except NameCollision as clash:
            connection.status.problem = str(clash)
            logger.error('downstream "%s" changed; the catalog keeps its previous state: %s', listing.spec.name, clash)
            return
        connection.status.problem = ""
        self._catalog = self._checked(after)
        if changed := _changes(before, after):
            await self._tell(changed)

    def first_catalog(self) -> Catalog | None:
        """The servers' first listings, as they answered them, in one catalog (None if their names clash)."""
        listings = [self._first_listings[name] for name in self._order if name in self._first_listings]
        try:
            return Catalog.build(listings)
        except NameCollision:
            return None

    def _checked(self, catalog: Catalog) -> Catalog:
        """`catalog`, after a warning for each tool it left out that was not reported before."""
        for item in catalog.left_out:
            if (item.server, item.name) not in self._warned:
                self._warned.add((item.server, item.name))
                logger.warning("%s", item.describe())
        return catalog

    def scrub(self, server: str, value: Any) -> Any:
        """`value` with the secrets of `server`'s connection (env or header values) replaced by [REDACTED]."""
        return self._connection(server).scrubbed(value)

    def _connection(self, server: str) -> DownstreamConnection:
        connection = self._connections.get(server)
        if connection is None:
            raise DownstreamUnavailable(f'no downstream server is named "{server}"')
        return connection

    # --- requests for a client ----------------------------------------------------------------------------------

    async def call_tool(
        self,
        server: str,
        tool: str,
        arguments: dict[str, Any],
        *,
        relay: ClientRelay,
        meta: dict[str, Any] | None = None,
    ) -> types.CallToolResult:
        """tools/call on `server` under its downstream name, exactly as it answers (no output-schema check: the
        agent's client does that). Raises DownstreamUnavailable (not sent), DownstreamLost or DownstreamTimedOut
        (sent, answer lost), ResultTooLarge (answered past the limit) or the server's MCPError."""
        forwarded = cast(types.RequestParamsMeta, meta) if meta else None
        params = types.CallToolRequestParams(name=tool, arguments=arguments, _meta=forwarded)
        result: types.CallToolResult = await self._connection(server).request(
            types.CallToolRequest(params=params), types.CallToolResult, relay
        )
        return result

    async def call_plain(self, server: str, params: dict[str, Any], *, relay: ClientRelay) -> dict[str, Any]:
        """The fast path's tools/call: `params` as the client sent them (the downstream's tool name in), the result
        as JSON, exactly as the server answered it; raises as call_tool does."""
        return await self._connection(server).call_plain(params, relay)

    async def get_prompt(
        self, server: str, name: str, arguments: dict[str, str] | None, *, relay: ClientRelay
    ) -> types.GetPromptResult:
        params = types.GetPromptRequestParams(name=name, arguments=arguments)
        result: types.GetPromptResult = await self._connection(server).request(
            types.GetPromptRequest(params=params), types.GetPromptResult, relay
        )
        return result

    async def read_resource(self, server: str, uri: str, *, relay: ClientRelay) -> types.ReadResourceResult:
        params = types.ReadResourceRequestParams(uri=uri)
        result: types.ReadResourceResult = await self._connection(server).request(
            types.ReadResourceRequest(params=params), types.ReadResourceResult, relay
        )
        return result

    def tools_stale(self, server: str) -> bool:
        """`server` said its tools changed, and they were not read again since."""
        return self._connection(server).tools_stale

    def tools_listed_within(self, server: str, seconds: float) -> bool:
        """`server`'s tools were read less than `seconds` ago and it has not said since that they changed."""
        connection = self._connection(server)
        return not connection.tools_stale and time.monotonic() - connection.tools_listed_at < seconds

    async def relist_tools(self, server: str, *, older_than: float = 0.0) -> None:
        """Re-read `server`'s tools now, or only when its listing is `older_than` seconds old or it said they changed;
        the catalog and its listeners are updated before this returns."""
        await self._connection(server).relist_tools_if_older(older_than)

    async def relist_stale_tools(self) -> bool:
        """Re-read the tools of every server that said they changed and was not read since (concurrently); whether
        there was any."""
        stale = [connection for connection in self._connections.values() if connection.tools_stale]
        async with anyio.create_task_group() as group:
            for connection in stale:
                group.start_soon(connection.relist_tools_if_older, 0.0)
        return bool(stale)

    async def refresh(self, kind: Kind) -> None:
        """Re-read one kind from every connected server that offers it, concurrently (prompts and resources are
        read fresh for each client listing; tools change only through list_changed)."""
        async with anyio.create_task_group() as group:
            for connection in self._connections.values():
                group.start_soon(connection.relist, kind)


def _changes(before: Catalog, after: Catalog) -> frozenset[str]:
    def dump(items: dict[str, Any]) -> list[Any]:
        return [(name, item.advertised().model_dump(mode="json")) for name, item in items.items()]

    changed = set()
    if dump(before.tools) != dump(after.tools):
        changed.add("tools")
    if dump(before.prompts) != dump(after.prompts):
        changed.add("prompts")
    if dump(before.resources) != dump(after.resources) or dump(before.templates) != dump(after.templates):
        changed.add("resources")
    if before.instructions != after.instructions:
        changed.add("instructions")
    return frozenset(changed)
