"""What an exception during a `kind: mcp` invocation means: an ActionFailure honest about what may have happened.

Anything before the tools/call request left (connecting, starting a stdio server, the capture read, a connection
refused before sending) is certain: nothing changed, so it is `uncertain=False`. A lost or unusable answer after
the request left is `uncertain=True`, retried only when the caller says so (`retry_lost`: a forward call the
contract declares idempotent, or any compensation). Messages quote the server's error and a stdio server's stderr,
clipped and with secrets scrubbed.
"""

from __future__ import annotations

from typing import TextIO

import httpx2
from mcp.shared.exceptions import MCPError
from mcp_types.jsonrpc import (
    CONNECTION_CLOSED,
    INTERNAL_ERROR,
    PARSE_ERROR,
    REQUEST_TIMEOUT,
)

from registry.actions.mcp._answer import TEXT_LIMIT, clip
from registry.actions.mcp._connection import Connection, Progress
from registry.errors import ActionFailure
from registry.secrets import scrub

# JSON-RPC errors the SDK synthesizes when an answer was lost or unreadable; the request may have been applied.
_LOST_ANSWER_CODES = frozenset({CONNECTION_CLOSED, REQUEST_TIMEOUT, PARSE_ERROR, INTERNAL_ERROR})
# Raised before a request reached the server: retrying cannot duplicate an effect.
_NOT_SENT = (httpx2.ConnectError, httpx2.ConnectTimeout, httpx2.PoolTimeout)


def _leaf(exc: BaseException) -> BaseException:
    """The first real error inside the task-group ExceptionGroups the SDK raises."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def _detail(exc: BaseException, conn: Connection, errlog: TextIO) -> str:
    if isinstance(exc, MCPError):
        text = f"MCP error {exc.code}: {exc.message}"
    else:
        text = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    if conn.transport == "stdio":
        errlog.flush()
        errlog.seek(0)
        stderr = errlog.read().strip()
        if stderr:
            text += f"; the server's stderr ends with: {stderr[-TEXT_LIMIT:]}"
    return clip(scrub(text, conn.secrets))


def failure(
    exc: BaseException,
    progress: Progress,
    conn: Connection,
    tool: str,
    timeout: float,
    errlog: TextIO,
    *,
    retry_lost: bool,
) -> ActionFailure:
    leaf = _leaf(exc)
    detail = _detail(leaf, conn, errlog)
    timed_out = isinstance(leaf, TimeoutError) or (isinstance(leaf, MCPError) and leaf.code == REQUEST_TIMEOUT)
    if progress.phase in ("connect", "list"):
        return _connect_failure(leaf, progress, conn, detail, timeout, timed_out)
    if progress.phase == "capture" or isinstance(leaf, _NOT_SENT):
        what = "the capture read" if progress.phase == "capture" else f"the {tool} call"
        return ActionFailure(
            "MCP_NOT_SENT",
            f"{what.capitalize()} on {conn.where} failed before {tool} was sent ({detail}). Nothing changed "
            "downstream, so retrying is safe.",
            retryable=True,
        )
    return _call_failure(leaf, conn, tool, detail, timeout, timed_out, retry_lost=retry_lost)


def _connect_failure(
    leaf: BaseException, progress: Progress, conn: Connection, detail: str, timeout: float, timed_out: bool
) -> ActionFailure:
    if conn.transport == "stdio" and isinstance(leaf, OSError) and not isinstance(leaf, TimeoutError):
        return ActionFailure(
            "MCP_SERVER_START_FAILED",
            f"Could not start {conn.where} ({detail}). Nothing was sent. Check the contract's command, args and "
            "cwd (relative paths resolve against the worker's working directory).",
            retryable=False,
        )
    doing = "listing the tools of" if progress.phase == "list" else "connecting to"
    cause = f"no answer within {timeout:g}s" if timed_out else detail
    hint = (
        "Is the process a working MCP stdio server? Run the command by hand to see its error."
        if conn.transport == "stdio"
        else "Is the server running and the URL its MCP endpoint? Are the headers (credentials) right?"
    )
    return ActionFailure(
        "MCP_CONNECT_FAILED",
        f"{doing.capitalize()} {conn.where} failed ({cause}). No tool was called, so retrying is safe. {hint}",
        retryable=True,
    )


def _call_failure(
    leaf: BaseException, conn: Connection, tool: str, detail: str, timeout: float, timed_out: bool, *, retry_lost: bool
) -> ActionFailure:
    if isinstance(leaf, MCPError) and leaf.code not in _LOST_ANSWER_CODES:
        if "Session terminated" in leaf.message:
            return ActionFailure(
                "MCP_SESSION_LOST",
                f"{conn.where} no longer knew the session when {tool} was called ({detail}); the call was not "
                "processed. Retrying opens a new session.",
                retryable=True,
            )
        return ActionFailure(
            "MCP_PROTOCOL_ERROR",
            f"{conn.where} refused the {tool} call with a protocol error ({detail}): the tool did not run. The "
            "contract's tool name or arguments do not match what the server accepts; fix the contract (or the "
            "input) rather than retrying.",
            retryable=False,
        )
    if isinstance(leaf, RuntimeError) and "structured content" in str(leaf):
        return ActionFailure(
            "MCP_RESULT_INVALID",
            f"Tool {tool} on {conn.where} reported success, but its answer does not match the output schema it "
            f"declares ({detail}), so no usable receipt was kept. The effect most likely happened: the outcome is "
            "uncertain; compensate or reconcile with the tool's owner.",
            retryable=False,
            uncertain=True,
        )
    what = f"no answer within {timeout:g}s" if timed_out else f"the answer was lost ({detail})"
    code = "MCP_TIMEOUT" if timed_out else "MCP_TRANSPORT_ERROR"
    retry = (
        "It is retried with the same idempotency key."
        if retry_lost
        else "It is not retried automatically: the contract does not declare the tool idempotent, and a second "
        "call could apply it twice unless the server deduplicates on the idempotency key."
    )
    return ActionFailure(
        code,
        f"Tool {tool} was sent to {conn.where}, but {what}. The tool may or may not have acted: the outcome is "
        f"uncertain. {retry}",
        retryable=retry_lost,
        uncertain=True,
    )
