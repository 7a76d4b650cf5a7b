"""JWT access tokens verified a moment ago, remembered so the next request with the same token is answered on the
event loop: no signature check, no JWKS look-up, no hop to a worker thread.

An entry lives until the token's own `exp` or for VERIFIED_TOKEN_SECONDS, whichever comes first, so a key the
identity provider withdraws from its JWKS stops being honoured within that time. Entries are keyed by the token's
SHA-256 digest (the token itself is never kept) and the protocol it was presented on; the least recently used go
first past VERIFIED_TOKENS_KEPT.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections import OrderedDict

from governance.identity.principal import Principal

VERIFIED_TOKENS_KEPT = 4096
VERIFIED_TOKEN_SECONDS = 60.0


class VerifiedTokens:
    def __init__(self, kept: int = VERIFIED_TOKENS_KEPT, seconds: float = VERIFIED_TOKEN_SECONDS) -> None:
        self._kept = kept
        self._seconds = seconds
        self._entries: OrderedDict[tuple[str, str], tuple[float, Principal]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, token: str, protocol: str) -> Principal | None:
        key = (_digest(token), protocol)
        with self._lock:
            found = self._entries.get(key)
            if found is None:
                return None
            if found[0] <= time.time():
                del self._entries[key]
                return None
            self._entries.move_to_end(key)
            return found[1]

    def put(self, token: str, protocol: str, principal: Principal, expires_at: float) -> None:
        """Remember a verified token until `expires_at` (epoch seconds; capped at VERIFIED_TOKEN_SECONDS from now)."""
        until = min(expires_at, time.time() + self._seconds)
        with self._lock:
            self._entries[(_digest(token), protocol)] = (until, principal)
            self._entries.move_to_end((_digest(token), protocol))
            while len(self._entries) > self._kept:
                self._entries.popitem(last=False)


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()
