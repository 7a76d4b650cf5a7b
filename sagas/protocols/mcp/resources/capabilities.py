"""The capabilities an MCP server of ours really has, era by era: the one `get_capabilities` of /mcp and the proxy
(`DeclaringServer`).

The SDK derives capabilities from the registered handlers: in 2026-07-28 it declares `listChanged` for tools,
prompts and resources as soon as subscriptions/listen is served, and `logging` whenever logging/setLevel is
registered. That era has no logging/setLevel (the SDK answers it -32601), so neither server declares logging there;
/mcp sends no list_changed notification of any kind (the proxy passes its downstreams' on); 2025-11-25 clients read
tasks support from `capabilities.tasks` (the 2026-07-28 era reads the extension serve_tasks declares).
"""

from __future__ import annotations

from typing import Any

import mcp.types as types
from mcp.server import Server
from mcp.server.lowlevel.server import NotificationOptions
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from sagas.protocols.mcp.tasks.methods import legacy_capability

EVERY_CHANGE = NotificationOptions(prompts_changed=True, resources_changed=True, tools_changed=True)


def as_implemented(
    capabilities: types.ServerCapabilities,
    protocol_version: str | None,
    *,
    list_changed: bool = False,
    tasks: bool = False,
) -> types.ServerCapabilities:
    """`capabilities` (the SDK's derivation) corrected to what is implemented; `resources.subscribe` stays as
    derived. `list_changed`: the server sends list_changed notifications; `tasks`: it serves tasks/*."""
    update: dict[str, Any] = {"tasks": legacy_capability() if tasks else None}
    if not list_changed:
        for name in ("tools", "prompts", "resources"):
            declared = getattr(capabilities, name)
            if declared is not None:
                update[name] = declared.model_copy(update={"list_changed": False})
    if protocol_version in MODERN_PROTOCOL_VERSIONS:
        update["logging"] = None
    return capabilities.model_copy(update=update)


class DeclaringServer(Server[Any]):
    """An SDK low-level server that declares what it implements (as_implemented). `sends_list_changed` and
    `tasks_served` say what it does; `offered` lets a subclass narrow the rest (the proxy: what its downstreams
    offer)."""

    sends_list_changed = False
    tasks_served = False

    def get_capabilities(
        self,
        notification_options: NotificationOptions | None = None,
        experimental_capabilities: dict[str, dict[str, Any]] | None = None,
        extensions: dict[str, dict[str, Any]] | None = None,
        *,
        protocol_version: str | None = None,
    ) -> types.ServerCapabilities:
        notify = EVERY_CHANGE if self.sends_list_changed else notification_options
        derived = super().get_capabilities(
            notify, experimental_capabilities, extensions, protocol_version=protocol_version
        )
        declared = as_implemented(
            derived, protocol_version, list_changed=self.sends_list_changed, tasks=self.tasks_served
        )
        return self.offered(declared)

    def offered(self, capabilities: types.ServerCapabilities) -> types.ServerCapabilities:
        return capabilities
