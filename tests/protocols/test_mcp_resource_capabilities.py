"""The capabilities correction the MCP server applies (sagas.protocols.mcp.resources.capabilities), both eras."""

from __future__ import annotations

import mcp.types as types

from sagas.protocols.mcp.resources.capabilities import as_implemented


def derived(list_changed: bool) -> types.ServerCapabilities:
    return types.ServerCapabilities(
        tools=types.ToolsCapability(list_changed=list_changed),
        prompts=types.PromptsCapability(list_changed=list_changed),
        resources=types.ResourcesCapability(subscribe=True, list_changed=list_changed),
        logging=types.LoggingCapability(),
        completions=types.CompletionsCapability(),
    )


def test_handshake_era_keeps_logging_and_subscribe_and_sends_no_list_changed():
    corrected = as_implemented(derived(False), "2025-11-25")
    assert corrected.resources is not None and corrected.resources.subscribe and not corrected.resources.list_changed
    assert corrected.logging is not None and corrected.completions is not None


def test_stateless_era_declares_no_list_changed_and_no_logging():
    corrected = as_implemented(derived(True), "2026-07-28")
    assert corrected.tools is not None and corrected.tools.list_changed is False
    assert corrected.prompts is not None and corrected.prompts.list_changed is False
    assert corrected.resources is not None and corrected.resources.subscribe and not corrected.resources.list_changed
    assert corrected.logging is None and corrected.completions is not None
