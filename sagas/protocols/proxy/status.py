"""The status of one downstream server as the proxy sees it: connected or not, what it offers, what its
notifications cost (sagas.protocols.proxy.floods). Logged when it changes, and by `DownstreamManager.status()`."""

from __future__ import annotations

import shlex
import time
from dataclasses import dataclass, field
from typing import Literal

from sagas.protocols.proxy.floods import NotificationCounts
from sagas.protocols.proxy.specs import ServerSpec

State = Literal["connecting", "connected", "down"]


@dataclass
class DownstreamStatus:
    """A point-in-time report on one downstream (never secret values: `where` is the URL or command line)."""

    server: str
    transport: str
    where: str
    state: State = "connecting"
    problem: str = ""  # why it is down, or a name collision that kept its latest listing out
    listing_problem: str = ""  # why the last re-listing failed (the previous list stayed); empty after a success
    attempts: int = 0
    connected_since: float | None = None  # epoch seconds
    retry_at: float | None = None  # epoch seconds of the next attempt while down
    server_name: str = ""
    server_version: str = ""
    protocol_version: str = ""
    tools: int = 0
    notifications: NotificationCounts = field(default_factory=NotificationCounts)  # dropped and coalesced

    def describe(self) -> str:
        flood = f"; {counted}" if (counted := self.notifications.describe()) else ""
        if self.state == "connected":
            return f'downstream "{self.server}" ({self.where}): connected, {self.tools} tool(s){flood}'
        if self.state == "connecting":
            return f'downstream "{self.server}" ({self.where}): connecting{flood}'
        wait = max(0.0, (self.retry_at or time.time()) - time.time())
        return f'downstream "{self.server}" ({self.where}): DOWN ({self.problem}); next attempt in {wait:.1f}s{flood}'


def where(spec: ServerSpec) -> str:
    return shlex.join([spec.command, *spec.args]) if spec.transport == "stdio" else spec.url
