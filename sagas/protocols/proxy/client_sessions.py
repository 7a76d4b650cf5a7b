"""The proxy's client sessions: each client connection's session saga, opened once and kept in memory.

A 2025-11-25 connection is one session (opened at its handshake); a stateless 2026-07-28 client is keyed by its
tenant, principal and client name, and its next call after SAGA_PROXY_SESSION_IDLE_SECONDS without one opens a new
session. Keys always include the tenant and the principal: a session is never found for anyone but who opened it.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import anyio
from django.conf import settings

from governance.identity.principal import Principal
from sagas.protocols.proxy.calls import ClientIdentity
from sagas.proxied_facts import ClientInfo, SessionFacts

# Client sessions one proxy process keeps in memory: far more than its live connections; a forgotten one's next
# call opens a new session saga.
SESSIONS_REMEMBERED = 10_000

# Opens a session saga for a principal (proxy_session_open through the journal); its saga id.
OpenSession = Callable[[Principal, SessionFacts], Awaitable[str]]


@dataclass
class Session:
    saga_id: str
    last_used: float = field(default_factory=time.monotonic)


def session_key(principal: Principal, client: ClientIdentity) -> str:
    owner = f"{principal.tenant_id}|{principal.principal_id}"
    return f"{owner}|{client.client_name or ''}" if client.stateless else f"{owner}|{client.key}"


class ClientSessions:
    def __init__(self, open_session: OpenSession, config_path: str) -> None:
        self.sessions: dict[str, Session] = {}
        self._open = open_session
        self._config_path = config_path
        self._opening = anyio.Lock()

    def known(self, principal: Principal, client: ClientIdentity) -> Session | None:
        """The session of a 2025-11-25 connection already opened, without taking the lock (a call's common case);
        None when `get` must decide."""
        if client.stateless:
            return None
        session = self.sessions.get(session_key(principal, client))
        if session is not None:
            session.last_used = time.monotonic()
        return session

    async def get(self, principal: Principal, client: ClientIdentity) -> Session:
        """The client's session, opened now if it has none (or, stateless, its last one has been idle too long)."""
        key = session_key(principal, client)
        async with self._opening:
            session = self.sessions.get(key)
            now = time.monotonic()
            idle = float(settings.SAGA_PROXY_SESSION_IDLE_SECONDS)
            if session is not None and not (client.stateless and now - session.last_used > idle):
                session.last_used = now
                return session
            metadata = SessionFacts(
                client=ClientInfo(name=client.client_name, version=client.client_version),
                protocol_version=client.protocol_version,
                era="2026-07-28" if client.stateless else "2025-11-25",
                connection=key,
                config=self._config_path,
            )
            session = self.sessions[key] = Session(await self._open(principal, metadata))
            self._forget_oldest()
            return session

    def forget(self, session: Session) -> None:
        for key in [key for key, kept in self.sessions.items() if kept is session]:
            del self.sessions[key]

    def _forget_oldest(self) -> None:
        """Bound the sessions this process remembers (their sagas stay): the least recently used go first."""
        excess = len(self.sessions) - SESSIONS_REMEMBERED
        if excess > 0:
            for key in sorted(self.sessions, key=lambda k: self.sessions[k].last_used)[:excess]:
                del self.sessions[key]
