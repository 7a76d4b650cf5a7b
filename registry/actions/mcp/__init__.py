"""MCP actions: forward, compensation and an optional capture are tool calls on a downstream MCP server.

One invocation is one short MCP connection (Streamable HTTP or a stdio subprocess), opened and closed inside
`anyio.run` in the calling thread: the coordinator calls actions from worker threads that have no event loop, and
a fresh connection per call keeps retries, recovery and threads independent of any shared client state. Inside
`shared_connections()` (the undo walk) a thread's calls to one server share one connection instead, opened on
first use and closed with the block, with the same per-call timeout, phases and failures (`_pool`).

Idempotency: every tools/call carries `_meta["io.semantic-saga/idempotency_key"]` (the step id, `<step id>:rollback`
for compensation, `<key>:capture` for the capture read), so a server that deduplicates applies a retry once.

The stored forward result (the step's receipt) is an envelope, so compensation templates can read both the tool's
answer and the state captured before it:

    {"tool": "update_contact", "result": <the answer's payload>, "result_from": "structuredContent" | "text" | "none",
     "content": <the answer's content blocks, as the caller got them>,
     "pre_state": <the capture answer's payload>, "pre_state_sha256": <sha256 of its canonical JSON>}  # with capture

The payload is registry.tool_answers' rule, the one every reader of a tool's answer applies: structuredContent,
else the first text block parsed as JSON, else none (null). In compensation arguments `${result.x}` reads the
envelope's `result` and `${pre_state.x}` its `pre_state`.

Failures are honest about what may have happened: anything before the tools/call request left (connecting,
resolving secrets, rendering arguments, the capture read) is `uncertain=False`; a lost or unusable answer after it
left is `uncertain=True` and retried only when the contract declares the forward call idempotent (a compensation is
always retried: compensations must be safe to repeat). `isError: true` is a permanent failure unless the call sets
`is_error_retryable`. A success answer over SAGA_MAX_ACTION_RESULT_BYTES is RESULT_TOO_LARGE, uncertain
(registry.actions.result_limit); a capture answer over it stops the call before the forward tool is sent.

This module runs one invocation (`call`); the parts are `_connection` (the server block, the transports, running
from sync code, how far an invocation got), `_pool` (a connection of its own, or the scope's shared one),
`_request` (tool calls, arguments, `_meta`, the kept pre_state),
`_answer` (the receipt envelope, isError, the result limit), `_failures` (an exception's meaning) and `_listing`
(`list_tools`, for import_mcp_tools).
"""

from __future__ import annotations

import functools
import logging
from typing import Any

from mcp import Client

from registry.actions import result_limit
from registry.actions.context import InvocationContext
from registry.actions.mcp import _request
from registry.actions.mcp._answer import TEXT_LIMIT, kept_output, outcome, pre_state_of, read_of, size_of
from registry.actions.mcp._connection import DEFAULT_TIMEOUT_SECONDS, USER_AGENT, Connection, Progress, connection
from registry.actions.mcp._failures import failure
from registry.actions.mcp._listing import MAX_TOOL_PAGES, ServerListing, list_tools
from registry.actions.mcp._pool import channel, shared_connections
from registry.actions.mcp._request import IDEMPOTENCY_META_KEY, ToolCall
from registry.capture_outcomes import proceeds
from registry.contracts import resolved_execution_policy

__all__ = [
    "DEFAULT_TIMEOUT_SECONDS",
    "IDEMPOTENCY_META_KEY",
    "MAX_TOOL_PAGES",
    "TEXT_LIMIT",
    "USER_AGENT",
    "Connection",
    "ServerListing",
    "call",
    "connection",
    "list_tools",
    "shared_connections",
]

logger = logging.getLogger("registry.actions.mcp")


async def _invoke(capture: ToolCall | None, call: ToolCall, progress: Progress, timeout: float, client: Client) -> None:
    # The timeout per request too: a shared client was opened by a call whose timeout may differ from this one's.
    if capture is not None:
        progress.phase = "capture"
        progress.captured = await client.call_tool(
            capture.tool, capture.arguments, read_timeout_seconds=timeout, meta=capture.meta
        )
        progress.captured_bytes = size_of(kept_output(progress.captured))
        if progress.captured_bytes > result_limit.limit() or not proceeds(capture.spec, read_of(progress, capture)):
            return  # outcome refuses: the forward call is not made
    progress.phase = "call"
    progress.answer = await client.call_tool(call.tool, call.arguments, read_timeout_seconds=timeout, meta=call.meta)
    progress.phase = "done"


def call(definition: dict[str, Any], ctx: InvocationContext, *, compensation: bool) -> Any:
    """Run the contract's forward (with its capture first) or compensation tool call; return the receipt
    envelope or raise ActionFailure."""
    part = "compensation" if compensation else "forward"
    request: dict[str, Any] = definition[part]
    scope = _request.scope(ctx, compensation)
    main = ToolCall(request["tool"], _request.arguments(request, scope, part), _request.meta(ctx.idempotency_key))
    capture = None
    kept = {} if compensation else _request.kept_pre_state(ctx)
    if not compensation and not kept and isinstance(definition.get("capture"), dict):
        spec = definition["capture"]
        capture = ToolCall(
            spec["tool"],
            _request.arguments(spec, scope, "capture"),
            _request.meta(f"{ctx.idempotency_key}:capture"),
            spec,
        )
    conn = connection(definition["server"])
    timeout = float(request.get("timeout_seconds", DEFAULT_TIMEOUT_SECONDS))
    retry_lost = compensation or bool(resolved_execution_policy(definition)["idempotent"])
    progress = Progress()
    with channel(conn, timeout) as connected:
        try:
            connected.run(functools.partial(_invoke, capture, main, progress, timeout))
        except Exception as exc:
            if progress.answer is None:
                lost = failure(exc, progress, conn, main.tool, timeout, connected.errlog, retry_lost=retry_lost)
                if progress.phase != "capture" and capture is not None and progress.captured is not None:
                    # The call was sent after the capture: keep what it read for whoever reconciles the call.
                    lost.receipt = {"tool": main.tool, **pre_state_of(read_of(progress, capture), conn)}
                elif kept:
                    lost.receipt = {"tool": main.tool, **kept}
                raise lost from None
            # The answer arrived; only closing the connection failed, which changes nothing downstream.
            logger.warning("closing the MCP connection to %s failed after the answer: %r", conn.where, exc)
    return {**outcome(progress, conn, main.tool, capture, request, compensation=compensation), **kept}
