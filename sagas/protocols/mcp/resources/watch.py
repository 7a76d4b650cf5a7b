"""Who listens for what, and the bounded poll that turns committed changes into MCP notifications.

2025-11-25 clients subscribe per connection (resources/subscribe) and set a log level (logging/setLevel): their
notifications go out on the connection's standalone channel. 2026-07-28 clients hold a subscriptions/listen stream;
its resource updates are published on the SDK's subscription bus, whose listen handler filters them per stream.
The poll runs every POLL_SECONDS only while something is watched: one query for all watched sagas' marks, one per
tenant with a log level set for its new audit events.
"""

from __future__ import annotations

import logging
import uuid
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import anyio
import mcp.types as types
from mcp.server import ServerRequestContext
from mcp.server.connection import Connection
from mcp.server.subscriptions import InMemorySubscriptionBus, ResourceUpdated

from governance.identity.principal import Principal
from sagas.protocols.mcp.resources import marks
from sagas.protocols.mcp.resources.reads import parse, saga_uris
from sagas.protocols.orm import run_orm

logger = logging.getLogger("sagas.protocols.mcp.resources")

POLL_SECONDS = 0.5
LOGGER_NAME = "semantic-saga.audit"
_KEY = "semantic-saga.resources.connection_key"
_LEVELS: tuple[types.LoggingLevel, ...] = (
    "debug",
    "info",
    "notice",
    "warning",
    "error",
    "critical",
    "alert",
    "emergency",
)
_ERRORS = ("_FAILED", "RECOVERY_REQUIRED")
_WARNINGS = ("_REFUSED", "_REJECTED", "_EXPIRED", "ATTEMPT_FAILED", "ROLLBACK_", "COMPENSATION_", "OVERRIDE")
_DEBUG = ("POLICY_DECISION", "NODE_READY", "STEP_STARTED", "RUN_REQUESTED", "CHECKPOINT_CREATED")


def event_level(event_type: str) -> types.LoggingLevel:
    """Failures are errors, refusals and unwinding are warnings, routine bookkeeping is debug, the rest info."""
    if "ATTEMPT_FAILED" not in event_type and any(part in event_type for part in _ERRORS):
        return "error"
    if any(part in event_type for part in _WARNINGS):
        return "warning"
    if event_type in _DEBUG:
        return "debug"
    return "info"


def at_least(level: types.LoggingLevel, threshold: types.LoggingLevel) -> bool:
    return _LEVELS.index(level) >= _LEVELS.index(threshold)


@dataclass
class Client:
    """One 2025-11-25 connection: its principal, subscribed URIs and log level."""

    connection: Connection
    principal: Principal
    uris: set[str] = field(default_factory=set)
    level: types.LoggingLevel | None = None


class Watch:
    def __init__(self) -> None:
        self.bus = InMemorySubscriptionBus()
        self._clients: dict[str, Client] = {}
        self._listened: Counter[str] = Counter()  # saga id -> open listen streams naming one of its URIs
        self._marks: dict[str, marks.Mark | None] = {}
        self._cursors: dict[str, marks.EventCursor] = {}

    # --- registration ------------------------------------------------------------------------------------------

    def client(self, ctx: ServerRequestContext[Any], principal: Principal) -> Client:
        connection: Connection = ctx.session._connection  # the SDK keeps the per-client Connection private
        key = connection.state.get(_KEY)
        if key is None or key not in self._clients:
            key = connection.state[_KEY] = uuid.uuid4().hex
            self._clients[key] = Client(connection, principal)
            connection.exit_stack.callback(self._forget, key)
        found = self._clients[key]
        found.principal = principal
        return found

    def _forget(self, key: str) -> None:
        self._clients.pop(key, None)
        self._prune()

    async def watch(self, saga_ids: set[str]) -> None:
        """Start from the sagas' current marks, unless already watched (another watcher must not miss a change)."""
        new = [saga_id for saga_id in saga_ids if saga_id not in self._marks]
        if new:
            current = await run_orm(marks.saga_marks, new)
            for saga_id in new:
                self._marks.setdefault(saga_id, current.get(saga_id))

    def listening(self, saga_ids: set[str]) -> None:
        self._listened.update(saga_ids)

    def stopped_listening(self, saga_ids: set[str]) -> None:
        self._listened.subtract(saga_ids)
        self._listened = +self._listened  # drop the zero counts
        self._prune()

    def log_level(self, client: Client, level: types.LoggingLevel) -> None:
        client.level = level
        self._cursors.setdefault(client.principal.tenant_id, marks.EventCursor.now())

    def _watched(self) -> set[str]:
        subscribed = {_saga_of(uri) for client in self._clients.values() for uri in client.uris}
        return {saga_id for saga_id in subscribed if saga_id} | set(self._listened)

    def _prune(self) -> None:
        watched = self._watched()
        self._marks = {saga_id: mark for saga_id, mark in self._marks.items() if saga_id in watched}
        tenants = {c.principal.tenant_id for c in self._clients.values() if c.level is not None}
        self._cursors = {tenant: cursor for tenant, cursor in self._cursors.items() if tenant in tenants}

    # --- the poll -----------------------------------------------------------------------------------------------

    async def run(self) -> None:
        """Poll until cancelled; a failed round (the database away for a moment) is logged and the next one tries."""
        while True:
            await anyio.sleep(POLL_SECONDS)
            try:
                await self.poll()
            except Exception:  # an outage must not end the watcher: subscriptions resume when it is back
                logger.exception("saga resource watcher: one poll failed; retrying")

    async def poll(self) -> None:
        self._prune()
        if self._marks:
            await self._updates()
        for tenant_id in list(self._cursors):
            await self._log(tenant_id)

    async def _updates(self) -> None:
        current = await run_orm(marks.saga_marks, list(self._marks))
        for saga_id, before in list(self._marks.items()):
            after = current.get(saga_id)
            if after == before:
                continue
            self._marks[saga_id] = after
            for uri in saga_uris(saga_id):
                await self.bus.publish(ResourceUpdated(uri=uri))
                for client in list(self._clients.values()):
                    if uri in client.uris:
                        await client.connection.send_resource_updated(uri)

    async def _log(self, tenant_id: str) -> None:
        cursor = self._cursors[tenant_id]
        events = await run_orm(marks.new_events, tenant_id, cursor)
        listeners = [c for c in self._clients.values() if c.level is not None and c.principal.tenant_id == tenant_id]
        for event in events:
            level = event_level(event["event_type"])
            for client in listeners:
                if client.level is not None and at_least(level, client.level):
                    params = {"level": level, "logger": LOGGER_NAME, "data": event}
                    await client.connection.notify("notifications/message", params)


def _saga_of(uri: str) -> str | None:
    target = parse(uri)
    return target.saga_id if target is not None else None
