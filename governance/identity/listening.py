"""Where this process accepts HTTP requests, as its serving command declared it before reading the token file.

A static token shorter than 16 characters (semantic-saga-mcp's CI writes such files) is accepted only while the
server listens on loopback alone: nobody off this machine can try guesses. A process that never declared an address
(`semantic-saga check`, an ASGI server started some other way) is treated as reachable, so the short token is
refused there with the reason.
"""

from __future__ import annotations

import ipaddress

_declared_host: str | None = None


def declare_listening(host: str) -> None:
    """`serve` (and the seed command lines, before their checks) say which address they are about to bind."""
    global _declared_host
    _declared_host = host


def declared_host() -> str | None:
    return _declared_host


def loopback_only() -> bool:
    return _declared_host is not None and is_loopback(_declared_host)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False
