"""MCP actions: forward, compensation and an optional capture are tool calls on a downstream MCP server.

One invocation is one short MCP connection (Streamable HTTP or a stdio subprocess), opened and closed inside
`anyio.run` in the calling thread: the coordinator calls actions from worker threads that have no event loop, and
a fresh connection per call keeps retries, recovery and threads independent of any shared client state.

Idempotency: every tools/call carries `_meta["io.semantic-saga/idempotency_key"]` (the step id, `<step id>:rollback`
for compensation, `<key>:capture` for the capture read), so a server that deduplicates applies a retry once.

The stored forward result (the step's receipt) is an envelope, so compensation templates can read both the tool's
answer and the state captured before it:

    {"tool": "update_contact", "result": <structuredContent, or the content blocks>,
     "pre_state": <capture tool answer>, "pre_state_sha256": <sha256 of its canonical JSON>}   # last two with capture

In compensation arguments `${result.x}` reads the envelope's `result` and `${pre_state.x}` its `pre_state`.

Failures are honest about what may have happened: anything before the tools/call request left (connecting,
resolving secrets, rendering arguments, the capture read) is `uncertain=False`; a lost or unusable answer after it
left is `uncertain=True` and retried only when the contract declares the forward call idempotent (a compensation is
always retried: compensations must be safe to repeat). `isError: true` is a permanent failure unless the call sets
`is_error_retryable`. A success answer over SAGA_MAX_ACTION_RESULT_BYTES is RESULT_TOO_LARGE, uncertain
(registry.actions.result_limit); a capture answer over it stops the call before the forward tool is sent.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import functools
import json
import logging
import shlex
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from importlib import metadata
from typing import Any, TextIO, TypeVar, cast

import anyio
import httpx2
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp.types import CallToolResult, Implementation, RequestParamsMeta, Tool
from mcp_types.jsonrpc import (
    CONNECTION_CLOSED,
    INTERNAL_ERROR,
    PARSE_ERROR,
    REQUEST_TIMEOUT,
)
from opentelemetry import propagate

from audit.canonical import canonical_json, sha256_hex
from registry.actions import result_limit
from registry.actions.context import InvocationContext
from registry.contracts import resolved_execution_policy
from registry.errors import ActionFailure
from registry.secrets import resolve_header, scrub
from registry.templating import render

logger = logging.getLogger("registry.actions.mcp")

IDEMPOTENCY_META_KEY = "io.semantic-saga/idempotency_key"
# A whole invocation (connect, capture, call) within 30 s: long enough for a slow downstream tool, short enough
# that a hung server releases the worker well before a typical lease runs out.
DEFAULT_TIMEOUT_SECONDS = 30.0
# Text kept from an isError answer, an oversized result or a stdio server's stderr, in receipts and messages.
TEXT_LIMIT = 2000
# Pages of tools/list read at most; 100 pages is far beyond any real server and bounds a misbehaving cursor.
MAX_TOOL_PAGES = 100
USER_AGENT = "semantic-saga"
# JSON-RPC errors the SDK synthesizes when an answer was lost or unreadable; the request may have been applied.
_LOST_ANSWER_CODES = frozenset({CONNECTION_CLOSED, REQUEST_TIMEOUT, PARSE_ERROR, INTERNAL_ERROR})
# Raised before a request reached the server: retrying cannot duplicate an effect.
_NOT_SENT = (httpx2.ConnectError, httpx2.ConnectTimeout, httpx2.PoolTimeout)

T = TypeVar("T")


@functools.cache
def _client_info() -> Implementation:
    try:
        version = metadata.version("semantic-saga")
    except metadata.PackageNotFoundError:
        version = "0"
    return Implementation(name="semantic-saga", version=version)


# --- the server connection --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Connection:
    """A server block of a contract with its secret references resolved (never stored or shown)."""

    transport: str
    url: str = ""
    headers: dict[str, str] = field(default_factory=dict)
    command: str = ""
    args: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    cwd: str | None = None
    secrets: tuple[str, ...] = ()

    @property
    def where(self) -> str:
        """How messages name the server: the URL, or the command line (never header or env values)."""
        if self.transport == "stdio":
            return f"the stdio server `{shlex.join([self.command, *self.args])}`"
        return self.url


def connection(server: dict[str, Any]) -> Connection:
    """Resolve the contract's server block; ActionFailure (nothing sent) when a secret is unavailable."""
    secrets: list[str] = []

    def resolve(values: dict[str, Any]) -> dict[str, str]:
        resolved = {}
        for name, value in values.items():
            resolved[name] = resolve_header(value)
            if not isinstance(value, str):
                secrets.append(resolved[name].removeprefix(value.get("prefix", "")))
        return resolved

    if server.get("transport") == "stdio":
        env = resolve(server.get("env") or {})
        return Connection(
            transport="stdio",
            command=str(server["command"]),
            args=tuple(str(arg) for arg in server.get("args") or ()),
            env=env,
            cwd=server.get("cwd"),
            secrets=tuple(secrets),
        )
    headers = resolve(server.get("headers") or {})
    return Connection(transport="streamable_http", url=str(server["url"]), headers=headers, secrets=tuple(secrets))


@contextlib.asynccontextmanager
async def _open(conn: Connection, timeout: float, errlog: TextIO) -> AsyncIterator[Client]:
    options: dict[str, Any] = {"read_timeout_seconds": timeout, "client_info": _client_info(), "cache": None}
    if conn.transport == "stdio":
        params = StdioServerParameters(command=conn.command, args=list(conn.args), env=conn.env or None, cwd=conn.cwd)
        async with Client(stdio_client(params, errlog=errlog), **options) as client:
            yield client
        return
    http = httpx2.AsyncClient(headers={"User-Agent": USER_AGENT, **conn.headers}, timeout=httpx2.Timeout(timeout))
    async with http, Client(streamable_http_client(conn.url, http_client=http), **options) as client:
        yield client


def _run_blocking(fn: Callable[[], Awaitable[T]]) -> T:
    """Run an async function to completion from sync code, in its own event loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return anyio.run(fn)
    # A loop already runs in this thread (an async caller used the sync API): run beside it, not inside it.
    with concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="mcp-action") as pool:
        return pool.submit(anyio.run, fn).result()


# --- one invocation ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _ToolCall:
    tool: str
    arguments: dict[str, Any]
    meta: RequestParamsMeta


@dataclass
class _Progress:
    """How far an invocation got; decides whether a failure is certain (nothing sent) or not."""

    phase: str = "connect"  # connect -> capture -> call (-> done); list for tools/list
    captured: CallToolResult | None = None
    captured_bytes: int = 0
    answer: CallToolResult | None = None
    tools: list[Tool] = field(default_factory=list)
    server: Implementation | None = None
    protocol_version: str = ""


async def _invoke(
    conn: Connection, capture: _ToolCall | None, call: _ToolCall, progress: _Progress, timeout: float, errlog: TextIO
) -> None:
    with anyio.fail_after(timeout):
        async with _open(conn, timeout, errlog) as client:
            if capture is not None:
                progress.phase = "capture"
                progress.captured = await client.call_tool(capture.tool, capture.arguments, meta=capture.meta)
                progress.captured_bytes = _size(_raw_output(progress.captured))
                if progress.captured.is_error or progress.captured_bytes > result_limit.limit():
                    return  # _outcome refuses: the forward call is not made
            progress.phase = "call"
            progress.answer = await client.call_tool(call.tool, call.arguments, meta=call.meta)
            progress.phase = "done"


def call(definition: dict[str, Any], ctx: InvocationContext, *, compensation: bool) -> Any:
    """Run the contract's forward (with its capture first) or compensation tool call; return the receipt
    envelope or raise ActionFailure."""
    part = "compensation" if compensation else "forward"
    request: dict[str, Any] = definition[part]
    scope = _scope(ctx, compensation)
    main = _ToolCall(request["tool"], _arguments(request, scope, part), _meta(ctx.idempotency_key))
    capture = None
    kept = {} if compensation else _kept_pre_state(ctx)
    if not compensation and not kept and isinstance(definition.get("capture"), dict):
        spec = definition["capture"]
        capture = _ToolCall(spec["tool"], _arguments(spec, scope, "capture"), _meta(f"{ctx.idempotency_key}:capture"))
    conn = connection(definition["server"])
    timeout = float(request.get("timeout_seconds", DEFAULT_TIMEOUT_SECONDS))
    retry_lost = compensation or bool(resolved_execution_policy(definition)["idempotent"])
    progress = _Progress()
    with _stderr_log() as errlog:
        try:
            _run_blocking(functools.partial(_invoke, conn, capture, main, progress, timeout, errlog))
        except Exception as exc:
            if progress.answer is None:
                failure = _failure(exc, progress, conn, main.tool, timeout, errlog, retry_lost=retry_lost)
                if progress.captured is not None and not progress.captured.is_error:
                    # The call was sent after a successful capture: keep the prior state for whoever reconciles it.
                    failure.receipt = {"tool": main.tool, **_pre_state(progress.captured, conn)}
                elif kept:
                    failure.receipt = {"tool": main.tool, **kept}
                raise failure from None
            # The answer arrived; only closing the connection failed, which changes nothing downstream.
            logger.warning("closing the MCP connection to %s failed after the answer: %r", conn.where, exc)
    return {**_outcome(progress, conn, main.tool, capture, request, compensation=compensation), **kept}


def _kept_pre_state(ctx: InvocationContext) -> dict[str, Any]:
    """The pre_state an earlier attempt of this step captured, if its answer was lost or it failed after the
    capture. A retry must not read the state again: the earlier attempt may already have changed it, and the
    inverse would then "restore" the changed value."""
    prior = ctx.prior_receipt
    if isinstance(prior, dict) and "pre_state" in prior and "pre_state_sha256" in prior:
        return {"pre_state": prior["pre_state"], "pre_state_sha256": prior["pre_state_sha256"]}
    return {}


def _scope(ctx: InvocationContext, compensation: bool) -> dict[str, Any]:
    scope = ctx.template_scope()
    if compensation:
        # The forward result is our envelope: templates see the tool's answer as `result`, the capture as `pre_state`.
        stored = ctx.result if isinstance(ctx.result, dict) else {}
        scope["result"] = stored.get("result")
        scope["pre_state"] = stored.get("pre_state")
    return scope


def _arguments(spec: dict[str, Any], scope: dict[str, Any], part: str) -> dict[str, Any]:
    rendered = render(spec.get("arguments", {}), scope, f"{part}.arguments")
    if not isinstance(rendered, dict):
        raise ActionFailure(
            "MCP_ARGUMENTS_INVALID",
            f"{part}.arguments rendered to a {type(rendered).__name__}, but tool arguments must be a JSON object. "
            "Nothing was sent. Fix the input (or the contract's arguments template) and retry.",
            retryable=False,
        )
    return rendered


def _meta(key: str) -> RequestParamsMeta:
    meta: dict[str, Any] = {IDEMPOTENCY_META_KEY: key}
    # W3C trace context of the current span (a no-op without tracing), so the downstream server joins the trace.
    propagate.inject(meta)
    return cast(RequestParamsMeta, meta)


@contextlib.contextmanager
def _stderr_log() -> Iterator[TextIO]:
    # A stdio server's stderr goes to a private temporary file: quoted (redacted) when the server fails, kept out
    # of the worker's own log otherwise.
    with tempfile.TemporaryFile(mode="w+", encoding="utf-8", errors="replace") as handle:
        yield cast(TextIO, handle)


def _outcome(
    progress: _Progress,
    conn: Connection,
    tool: str,
    capture: _ToolCall | None,
    request: dict[str, Any],
    *,
    compensation: bool,
) -> dict[str, Any]:
    pre_state: dict[str, Any] = {}
    if progress.captured is not None:
        if progress.captured.is_error:
            raise _capture_refused(progress.captured, conn, capture)
        if progress.captured_bytes > result_limit.limit():
            raise _capture_too_large(progress.captured_bytes, conn, capture)
        pre_state = _pre_state(progress.captured, conn)
    answer = progress.answer
    assert answer is not None  # _invoke either sets it, returns after a refused capture, or raises
    if not answer.is_error and not compensation and (size := _size(_raw_output(answer))) > result_limit.limit():
        raise _result_too_large(answer, size, conn, tool, pre_state)
    output = scrub(_tool_output(answer), conn.secrets)
    if answer.is_error:
        retryable = bool(request.get("is_error_retryable", False))
        raise ActionFailure(
            "MCP_TOOL_ERROR",
            f"Tool {tool} on {conn.where} answered isError: {_error_text(output)}. The tool reported a failure"
            + (
                "; the contract treats this as temporary, so it is retried with the same idempotency key."
                if retryable
                else "; retrying the same arguments will fail the same way. Check the input; the receipt holds "
                "the tool's answer."
            ),
            retryable=retryable,
            receipt={"tool": tool, "is_error": True, "result": output, **pre_state},
        )
    return {"tool": tool, "result": output, **pre_state}


def _pre_state(captured: CallToolResult, conn: Connection) -> dict[str, Any]:
    state = scrub(_tool_output(captured), conn.secrets)
    return {"pre_state": state, "pre_state_sha256": sha256_hex(state)}


def _capture_refused(captured: CallToolResult, conn: Connection, capture: _ToolCall | None) -> ActionFailure:
    name = capture.tool if capture else "?"
    output = scrub(_tool_output(captured), conn.secrets)
    return ActionFailure(
        "MCP_CAPTURE_FAILED",
        f"The capture tool {name} on {conn.where} answered isError: {_error_text(output)}. The state before the "
        "call could not be read, so the forward call was NOT made (nothing changed). Check the input; retrying the "
        "same arguments will fail the same way.",
        retryable=False,
        receipt={"tool": name, "is_error": True, "result": output},
    )


def _capture_too_large(size: int, conn: Connection, capture: _ToolCall | None) -> ActionFailure:
    name = capture.tool if capture else "?"
    return ActionFailure(
        result_limit.CODE,
        f"The capture tool {name} on {conn.where} answered {size} bytes of JSON, more than the "
        f"{result_limit.limit()} bytes a step keeps (SAGA_MAX_ACTION_RESULT_BYTES). The state before the call could "
        "not be kept whole, so the forward call was NOT made (nothing changed). Capture less (a narrower capture "
        "tool or arguments), or raise SAGA_MAX_ACTION_RESULT_BYTES.",
        retryable=False,
    )


def _result_too_large(
    answer: CallToolResult, size: int, conn: Connection, tool: str, pre_state: dict[str, Any]
) -> ActionFailure:
    # Redact before cutting: a cut through a secret would leave a prefix no longer matched.
    head = _clip(scrub(json.dumps(_raw_output(answer), ensure_ascii=False), conn.secrets))
    answered = f"Tool {tool} on {conn.where} reported success with {size} bytes of JSON"
    return result_limit.too_large(answered, {"tool": tool, "bytes": size, "text": head, **pre_state})


def _raw_output(result: CallToolResult) -> Any:
    """structuredContent when the tool gave it, else its content blocks as JSON."""
    if result.structured_content is not None:
        return result.structured_content
    return [block.model_dump(mode="json", by_alias=True, exclude_none=True) for block in result.content]


def _size(output: Any) -> int:
    return len(canonical_json(output))


def _tool_output(result: CallToolResult) -> Any:
    """The tool's output (_raw_output), truncated past SAGA_MAX_ACTION_RESULT_BYTES: what an isError receipt or a
    compensation's answer keeps (a forward result or a capture past the limit fails the call instead)."""
    output = _raw_output(result)
    size = _size(output)
    if size <= result_limit.limit():
        return output
    return {"truncated": True, "bytes": size, "text": json.dumps(output, ensure_ascii=False)[:TEXT_LIMIT]}


def _error_text(output: Any) -> str:
    if isinstance(output, list):
        texts = [block.get("text", "") for block in output if isinstance(block, dict) and block.get("type") == "text"]
        if any(texts):
            return _clip(" ".join(texts))
    return _clip(json.dumps(output, ensure_ascii=False))


def _clip(text: str) -> str:
    return text if len(text) <= TEXT_LIMIT else text[: TEXT_LIMIT - 3] + "..."


# --- failures ---------------------------------------------------------------------------------------------------


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
    return _clip(scrub(text, conn.secrets))


def _failure(
    exc: BaseException,
    progress: _Progress,
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
    leaf: BaseException, progress: _Progress, conn: Connection, detail: str, timeout: float, timed_out: bool
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


# --- listing tools (import_mcp_tools) ---------------------------------------------------------------------------


@dataclass(frozen=True)
class ServerListing:
    name: str | None
    version: str | None
    protocol_version: str
    tools: list[Tool]


async def _list(conn: Connection, progress: _Progress, timeout: float, errlog: TextIO) -> None:
    with anyio.fail_after(timeout):
        async with _open(conn, timeout, errlog) as client:
            progress.phase = "list"
            progress.server = client.server_info
            progress.protocol_version = client.protocol_version
            cursor: str | None = None
            for _ in range(MAX_TOOL_PAGES):
                page = await client.list_tools(cursor=cursor)
                progress.tools.extend(page.tools)
                cursor = page.next_cursor
                if cursor is None:
                    break
            progress.phase = "done"


def list_tools(server: dict[str, Any], *, timeout: float = DEFAULT_TIMEOUT_SECONDS) -> ServerListing:
    """Connect to a server block (literal values or secret references) and list its tools; ActionFailure when the
    server cannot be reached or started."""
    conn = connection(server)
    progress = _Progress()
    with _stderr_log() as errlog:
        try:
            _run_blocking(functools.partial(_list, conn, progress, timeout, errlog))
        except Exception as exc:
            if progress.phase != "done":
                raise _failure(exc, progress, conn, "tools/list", timeout, errlog, retry_lost=True) from None
            logger.warning("closing the MCP connection to %s failed after listing: %r", conn.where, exc)
    info = progress.server
    return ServerListing(
        name=info.name if info else None,
        version=info.version if info else None,
        protocol_version=progress.protocol_version,
        tools=progress.tools,
    )
