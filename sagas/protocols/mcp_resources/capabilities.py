"""The capabilities this server's resources, logging and completion really have, era by era.

The SDK derives them from the registered handlers; in 2026-07-28 it declares `listChanged` for tools, prompts and
resources as soon as subscriptions/listen is served, and `logging` whenever logging/setLevel is registered. This
server sends no list_changed notification of any kind, and no log messages to 2026-07-28 clients (that era has no
logging/setLevel, and audit-derived messages go only to 2025-11-25 sessions that set a level).
"""

from __future__ import annotations

from typing import Any

import mcp.types as types
from mcp_types.version import MODERN_PROTOCOL_VERSIONS


def as_implemented(capabilities: types.ServerCapabilities, protocol_version: str | None) -> types.ServerCapabilities:
    """`capabilities` (the SDK's derivation) corrected to what is implemented; `resources.subscribe` stays true."""
    update: dict[str, Any] = {}
    for name in ("tools", "prompts", "resources"):
        declared = getattr(capabilities, name)
        if declared is not None:
            update[name] = declared.model_copy(update={"list_changed": False})
    if protocol_version in MODERN_PROTOCOL_VERSIONS:
        update["logging"] = None
    return capabilities.model_copy(update=update)
