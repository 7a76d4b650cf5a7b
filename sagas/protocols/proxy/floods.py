"""A downstream's notifications, bounded: however fast a server sends them, the proxy's memory and its other servers'
calls do not follow.

Why this is needed: the SDK's client session starts one task per notification it receives and does not wait for it
(mcp.shared.jsonrpc_dispatcher `_spawn`), so it reads a server as fast as the server writes. A notification relayed
to an agent (a log message, progress) waits for the agent's connection; an agent that reads slower than the server
writes left one waiting task per notification, and a flood of them grew the stdio proxy by tens of MiB a second
until the agent read them all, if ever.

So each downstream's read stream passes through a NotificationGate, before the SDK sees anything:
- `notifications/*/list_changed` are taken out and coalesced: each marks its kind stale for the connection's one
  re-listing of that kind (one re-list covers any number of them); none is dropped, and none costs a task;
- every other notification (and every malformed message) spends a token of the server's bucket: `perSecond` tokens
  a second, at most `burst` saved up (the server's `notificationsPerSecond` and `notificationBurst`, default
  100/s and 200); past it the notification is dropped, counted by method (those MCP does not define together);
- a relayed notification waits for the agent only while fewer than MAX_RELAYING of that server's do; past it the
  agent's client is not reading, and the notification is dropped and counted too.

The counts are in the server's status (`DownstreamStatus.notifications`); the proxy's log says what was dropped once
per REPORT_SECONDS while a flood lasts (the first drop at once, the rest when the proxy stops), never once per
notification.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Literal

import anyio
from mcp.shared.message import SessionMessage
from mcp_types.jsonrpc import JSONRPCNotification

from sagas.protocols.proxy.raw_channel import RawAnswer

logger = logging.getLogger("sagas.protocols.proxy")

DEFAULT_PER_SECOND = 100
DEFAULT_BURST = 200
# A flood is reported at its first drop, then at most once per this many seconds while it goes on.
REPORT_SECONDS = 10.0
# Notifications of one server waiting for the agent's connection at once; more mean the agent is not reading.
MAX_RELAYING = 64
ListKind = Literal["tools", "prompts", "resources"]
LIST_CHANGED: dict[str, ListKind] = {
    "notifications/tools/list_changed": "tools",
    "notifications/prompts/list_changed": "prompts",
    "notifications/resources/list_changed": "resources",
}
MALFORMED = "malformed messages"
# Drops are counted under the method's name only for the methods MCP defines: a server inventing a new name for each
# notification would otherwise grow the counts without bound.
COUNTED_METHODS = frozenset(
    {
        "notifications/message",
        "notifications/progress",
        "notifications/resources/updated",
        "notifications/cancelled",
        "notifications/elicitation/complete",
        "notifications/tasks/status",
    }
)
OTHER_METHODS = "other methods"
NOT_READING = "while the agent's client was not reading"


@dataclass
class NotificationCounts:
    """What a server's notifications cost it, since the proxy started (kept across reconnections)."""

    dropped: int = 0
    coalesced: int = 0  # list_changed notices folded into a re-listing already due
    dropped_by_method: Counter[str] = field(default_factory=Counter)

    def describe(self) -> str:
        """'' when nothing was dropped or coalesced; else what was, for a status line."""
        parts = []
        if self.dropped:
            parts.append(f"{self.dropped} notification(s) dropped over its rate")
        if self.coalesced:
            parts.append(f"{self.coalesced} list_changed coalesced")
        return ", ".join(parts)


class TokenBucket:
    """`per_second` tokens a second, at most `burst` saved up."""

    def __init__(self, per_second: float, burst: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.per_second = per_second
        self.burst = burst
        self._clock = clock
        self._tokens = float(burst)
        self._at = clock()

    def take(self) -> bool:
        now = self._clock()
        self._tokens = min(float(self.burst), self._tokens + (now - self._at) * self.per_second)
        self._at = now
        if self._tokens < 1.0:
            return False
        self._tokens -= 1.0
        return True


class NotificationGate:
    """The bound on one downstream's notifications (see the module docstring). `on_list_changed(kind)` queues a
    re-listing of `kind` and says whether one was already queued."""

    def __init__(
        self,
        server: str,
        on_list_changed: Callable[[ListKind], bool],
        *,
        per_second: float = DEFAULT_PER_SECOND,
        burst: int = DEFAULT_BURST,
        counts: NotificationCounts | None = None,
        report_seconds: float = REPORT_SECONDS,
    ) -> None:
        self.server = server
        self.counts = counts if counts is not None else NotificationCounts()
        self._bucket = TokenBucket(per_second, burst)
        self._on_list_changed = on_list_changed
        self._report_seconds = report_seconds
        self._relaying = 0
        self._unreported: Counter[str] = Counter()
        self._dropped = anyio.Event()

    def gated(self, stream: Any) -> GatedStream:
        """`stream` (a transport's read stream) less what this gate drops."""
        return GatedStream(stream, self)

    def admit(self, item: SessionMessage | Exception) -> bool:
        """Whether `item` goes on to the session; requests and answers always do."""
        if isinstance(item, Exception):
            return self._within_rate(MALFORMED)
        message = item.message
        if not isinstance(message, JSONRPCNotification):
            return True
        kind = LIST_CHANGED.get(message.method)
        if kind is not None:
            if self._on_list_changed(kind):
                self.counts.coalesced += 1
            return False  # taken care of: the re-listing is queued
        return self._within_rate(message.method if message.method in COUNTED_METHODS else OTHER_METHODS)

    async def relay(self, send: Callable[[], Awaitable[None]], what: str) -> None:
        """Run `send` (a notification on its way to the agent) unless MAX_RELAYING of this server's already wait."""
        if self._relaying >= MAX_RELAYING:
            self._drop(f"{what} {NOT_READING}")
            return
        self._relaying += 1
        try:
            await send()
        finally:
            self._relaying -= 1

    async def report(self) -> None:
        """Log what was dropped: at the first drop, then at most once per interval while drops go on, and what is
        left to say when the proxy stops (run for the connection's lifetime)."""
        try:
            while True:
                await self._dropped.wait()
                self._dropped = anyio.Event()
                self._log_dropped()
                await anyio.sleep(self._report_seconds)
        finally:
            self._log_dropped()

    def _within_rate(self, what: str) -> bool:
        if self._bucket.take():
            return True
        self._drop(what)
        return False

    def _drop(self, what: str) -> None:
        self.counts.dropped += 1
        self.counts.dropped_by_method[what] += 1
        self._unreported[what] += 1
        self._dropped.set()

    def _log_dropped(self) -> None:
        if not self._unreported:
            return
        total = sum(self._unreported.values())
        shown = ", ".join(f"{what} {count}" for what, count in self._unreported.most_common())
        self._unreported.clear()
        logger.warning(
            'downstream "%s" sent notifications faster than its limit (%g/s, burst %d) or faster than the agent '
            "reads them: %d dropped (%s), %d since the proxy started. If this server is trusted to be this "
            "chatty, raise servers.%s.notificationsPerSecond in the proxy configuration.",
            self.server,
            self._bucket.per_second,
            self._bucket.burst,
            total,
            shown,
            self.counts.dropped,
            self.server,
        )


class GatedStream:
    """A read stream (the SDK's ReadStream protocol) that skips what the gate does not admit, and hands the fast
    path's answers (sagas.protocols.proxy.raw_channel.RawAnswer) to their calls."""

    def __init__(self, inner: Any, gate: NotificationGate) -> None:
        self._inner = inner
        self._gate = gate

    @property
    def last_context(self) -> Any:
        # The SDK reads the sender's contextvars here when the transport keeps them (Streamable HTTP).
        return getattr(self._inner, "last_context", None)

    async def receive(self) -> Any:
        while True:
            item = await self._inner.receive()  # a checkpoint each time: dropping a flood never starves the loop
            if isinstance(item, RawAnswer):  # a fast-path call's answer, after what the server sent before it
                item.deliver()
                continue
            if self._gate.admit(item):
                return item

    async def aclose(self) -> None:
        await self._inner.aclose()

    def __aiter__(self) -> GatedStream:
        return self

    async def __anext__(self) -> Any:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def __aenter__(self) -> GatedStream:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()
