"""The invocation interface the coordinator calls, always outside any database transaction.

`invoke_forward` / `invoke_compensation` take the contract snapshot pinned on the step (not the current registry
row), so a historical step is undone with the contract it ran under. Both return the result (the receipt stored
on the step) or raise `ActionFailure`; any other exception is a bug in a handler.

Each kind's handler module is imported on its first call: the MCP kind pulls in the MCP SDK, the HTTP kind httpx,
and a process that never runs an action of that kind (an operator's `semantic-saga pending`) never pays for them.
"""

from __future__ import annotations

from typing import Any

from registry.actions.context import InvocationContext
from registry.contracts import has_compensation
from registry.errors import ActionFailure

__all__ = ["InvocationContext", "invoke_compensation", "invoke_forward"]


def invoke_forward(definition: dict[str, Any], ctx: InvocationContext) -> Any:
    return _dispatch(definition, definition["forward"], ctx, compensation=False)


def invoke_compensation(definition: dict[str, Any], ctx: InvocationContext) -> Any:
    """Precondition: has_compensation(definition). The coordinator skips steps that have nothing to undo."""
    if not has_compensation(definition):
        raise ActionFailure(
            "NO_COMPENSATION",
            f"{_name(definition)} declares no compensation, so there is nothing to run. Its effect (if any) "
            "must be reconciled by an operator.",
            retryable=False,
        )
    return _dispatch(definition, definition["compensation"], ctx, compensation=True)


def _dispatch(
    definition: dict[str, Any], request: dict[str, Any], ctx: InvocationContext, *, compensation: bool
) -> Any:
    kind = definition.get("kind")
    if kind == "http":
        from registry.actions import http

        return http.call(request, ctx, compensation=compensation)
    if kind == "builtin":
        from registry.actions import builtin

        return builtin.call(request, ctx)
    if kind == "mcp":
        from registry.actions import mcp

        return mcp.call(definition, ctx, compensation=compensation)
    raise ActionFailure(
        "UNKNOWN_ACTION_KIND",
        f"{_name(definition)} has kind {kind!r}, which this server cannot run (known: http, builtin, mcp). Nothing "
        "ran.",
        retryable=False,
    )


def _name(definition: dict[str, Any]) -> str:
    return f"{definition.get('id', '?')}@{definition.get('version', '?')}"
