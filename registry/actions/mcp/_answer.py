"""Reading the answers of a `kind: mcp` invocation into the step's receipt, or into the failure they mean.

The forward receipt is the envelope the package docstring shows: `{"tool", "result", "result_from", "content"}`
(`result` is the answer's payload by registry.tool_answers' rule, `content` its content blocks as the caller got
them), plus `pre_state` (the capture answer's payload) and `pre_state_sha256` when the contract declares a capture.

`isError: true` is a permanent failure unless the call sets `is_error_retryable`; a capture that answers isError
stops the call before the forward tool is sent. A success answer over SAGA_MAX_ACTION_RESULT_BYTES is
RESULT_TOO_LARGE, uncertain (registry.actions.result_limit); a capture answer over it stops the call too. Secrets
are scrubbed from everything kept.
"""

from __future__ import annotations

import json
from typing import Any

from mcp.types import CallToolResult

from audit.canonical import canonical_json, sha256_hex
from registry.actions import result_limit
from registry.actions.mcp._connection import Connection, Progress
from registry.actions.mcp._request import ToolCall
from registry.capture_outcomes import OUTCOME_KEY, UNMATCHED, CaptureRead, proceeds, read_outcome
from registry.errors import ActionFailure
from registry.secrets import scrub
from registry.tool_answers import answer_text, payload_of, text_of

# Text kept from an isError answer, an oversized result or a stdio server's stderr, in receipts and messages.
TEXT_LIMIT = 2000


def outcome(
    progress: Progress,
    conn: Connection,
    tool: str,
    capture: ToolCall | None,
    request: dict[str, Any],
    *,
    compensation: bool,
) -> dict[str, Any]:
    pre_state: dict[str, Any] = {}
    if progress.captured is not None and capture is not None:
        if progress.captured_bytes > result_limit.limit():
            raise _capture_too_large(progress.captured_bytes, conn, capture)
        read = read_of(progress, capture)
        if not proceeds(capture.spec, read):
            raise _capture_refused(progress.captured, conn, capture, read)
        pre_state = pre_state_of(read, conn)
    answer = progress.answer
    assert answer is not None  # the invocation either sets it, returns after a refused capture, or raises
    if not answer.is_error and not compensation and (size := size_of(kept_output(answer))) > result_limit.limit():
        raise _result_too_large(answer, size, conn, tool, pre_state)
    output = scrub(_tool_output(answer), conn.secrets)
    if answer.is_error:
        retryable = bool(request.get("is_error_retryable", False))
        raise ActionFailure(
            "MCP_TOOL_ERROR",
            f"Tool {tool} on {conn.where} answered isError: {_error_text(answer, conn)}. The tool reported a failure"
            + (
                "; the contract treats this as temporary, so it is retried with the same idempotency key."
                if retryable
                else "; retrying the same arguments will fail the same way. Check the input; the receipt holds "
                "the tool's answer."
            ),
            retryable=retryable,
            receipt={"tool": tool, "is_error": True, **output, **pre_state},
        )
    return {"tool": tool, **output, **pre_state}


def read_of(progress: Progress, capture: ToolCall) -> CaptureRead:
    """What the capture read found (registry.capture_outcomes), by the contract's rules for its answer."""
    answer = wire(progress.captured) if progress.captured is not None else {}
    return read_outcome(
        capture.spec, is_error=bool(answer.get("isError")), text=text_of(answer), payload=payload_of(answer).value
    )


def pre_state_of(read: CaptureRead, conn: Connection) -> dict[str, Any]:
    """What the receipt keeps of the capture: the state the inverse restores, as `pre_state` with its hash; or,
    when it found nothing, the outcome whose branch undoes the call."""
    if not read.found:
        return {OUTCOME_KEY: read.outcome}
    state = scrub(read.state, conn.secrets)
    return {"pre_state": state, "pre_state_sha256": sha256_hex(state)}


def _capture_refused(
    captured: CallToolResult, conn: Connection, capture: ToolCall | None, read: CaptureRead
) -> ActionFailure:
    name = capture.tool if capture else "?"
    output = scrub(_tool_output(captured), conn.secrets)
    answered = (
        f"answered text its text_pattern does not match ({_error_text(captured, conn)}), and the contract has no "
        "when_unmatched (or when_absent) branch"
        if read.outcome == UNMATCHED
        else f"answered isError: {_error_text(captured, conn)}"
    )
    return ActionFailure(
        "MCP_CAPTURE_FAILED",
        f"The capture tool {name} on {conn.where} {answered}. The state before the call could not be read, so the "
        "forward call was NOT made (nothing changed). Check the input; retrying the same arguments will fail the "
        "same way.",
        retryable=False,
        receipt={"tool": name, "is_error": bool(captured.is_error), **output},
    )


def _capture_too_large(size: int, conn: Connection, capture: ToolCall | None) -> ActionFailure:
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
    head = clip(scrub(json.dumps(kept_output(answer), ensure_ascii=False), conn.secrets))
    answered = f"Tool {tool} on {conn.where} reported success with {size} bytes of JSON"
    return result_limit.too_large(answered, {"tool": tool, "bytes": size, "text": head, **pre_state})


def wire(result: CallToolResult) -> dict[str, Any]:
    """The answer as it went over the wire (`content`, `structuredContent`, `isError`)."""
    return result.model_dump(mode="json", by_alias=True, exclude_none=True)


def kept_output(result: CallToolResult) -> dict[str, Any]:
    """What the receipt keeps of an answer: its payload (registry.tool_answers), where the payload came from, and
    the content blocks as the caller got them."""
    answer = wire(result)
    payload = payload_of(answer)
    return {"result": payload.value, "result_from": payload.source, "content": answer.get("content", [])}


def size_of(output: Any) -> int:
    return len(canonical_json(output))


def _tool_output(result: CallToolResult) -> dict[str, Any]:
    """The receipt's part for an answer (kept_output), cut past SAGA_MAX_ACTION_RESULT_BYTES: what an isError
    receipt or a compensation's answer keeps (a forward result or a capture past the limit fails the call instead)."""
    output = kept_output(result)
    size = size_of(output)
    if size <= result_limit.limit():
        return output
    text = json.dumps(output, ensure_ascii=False)[:TEXT_LIMIT]
    return {"result": {"truncated": True, "bytes": size, "text": text}, "result_from": "none", "content": []}


def _error_text(result: CallToolResult, conn: Connection) -> str:
    return clip(scrub(answer_text(wire(result)), conn.secrets))


def clip(text: str) -> str:
    return text if len(text) <= TEXT_LIMIT else text[: TEXT_LIMIT - 3] + "..."
