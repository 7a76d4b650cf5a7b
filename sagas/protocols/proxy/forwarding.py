"""Forwarding a proxied call that was journaled EXECUTING: the pack's capture read first (its answer is the step's
`pre_state`), then the call with the step id as its idempotency key, then its outcome recorded through the
operation table (proxy_call_finish), whatever happened: answered, not sent, lost (uncertain), too large, or the
client gone while it was out. docs/proxy.md, "How a call is journaled"."""

from __future__ import annotations

import functools
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import anyio
import mcp.types as types
from mcp.shared.exceptions import MCPError

from governance.identity.principal import Principal
from registry.capture_outcomes import ABSENT, UNMATCHED, after_read, proceeds, read_outcome, state_of
from registry.errors import ActionFailure
from registry.packs import PackEntry
from registry.templating import render
from registry.tool_answers import answer_text, payload_of, text_of
from sagas.protocols.proxy.calls import (
    ProxiedCall,
    capture_failed_result,
    not_sent_result,
    too_large_result,
    uncertain_result,
)
from sagas.protocols.proxy.downstream import DownstreamLost, DownstreamManager, DownstreamUnavailable, ResultTooLarge
from sagas.proxied_facts import CallOutcome

IDEMPOTENCY_META_KEY = "io.semantic-saga/idempotency_key"
GONE_BEFORE_SENT = "the client went away before the call was sent"
GONE_WHILE_OUT = "the client went away while the call was out, so its answer was not read: whether it acted is unknown"

# Runs one operation of the table for a principal (the durable path's journal).
Op = Callable[..., Awaitable[dict[str, Any]]]
# Records a sent (or unsent) call's outcome, given when it started (time.monotonic()) and CallOutcome's other fields.
Recorder = Callable[[float, dict[str, Any]], Awaitable[None]]
# The usable pack entry of (server, tool), if any (sagas.protocols.proxy.trust ToolTrust.pack_entry).
PackEntryFor = Callable[[str, str], PackEntry | None]


Sent = TypeVar("Sent")


@dataclass(frozen=True)
class NotAnswered:
    """A call the server did not answer (not sent, lost, or answered past the limit): what the agent is told."""

    result: types.CallToolResult


class CaptureFailed(Exception):
    """The state before a call could not be read, so the call was not sent (its inverse would have nothing).
    `unavailable`: the server could not be reached (try again later); otherwise it answered an error, or the read
    could not be built from the arguments (the same arguments fail the same way)."""

    def __init__(self, message: str, *, unavailable: bool = False) -> None:
        super().__init__(message)
        self.unavailable = unavailable


class Forwarder:
    def __init__(self, downstreams: DownstreamManager, pack_entry: PackEntryFor, max_result_bytes: int, op: Op) -> None:
        self.downstreams = downstreams
        self.pack_entry = pack_entry
        self.max_result_bytes = max_result_bytes  # ledger.maxResultBytes: what the journal keeps of an answer
        self.op = op

    async def forward(
        self, request: ProxiedCall, begun: dict[str, Any], recorder: Recorder | None = None
    ) -> types.CallToolResult:
        """Send the call (after the pack's capture read, if any) and record its outcome: by default with
        proxy_call_finish on the step `begun` names, which is also the forward's idempotency key; a read journaled
        behind its answer (sagas.protocols.proxy.behind) gives the id its step will have, and its own `recorder`."""
        record: Recorder = recorder or functools.partial(self.record, request.principal, begun)
        meta = {**request.meta, IDEMPOTENCY_META_KEY: begun["step_id"]} if "step_id" in begun else request.meta
        started = time.monotonic()
        outcome: dict[str, Any] = {"max_result_bytes": self.max_result_bytes}
        capture = self._capture_spec(request)
        try:
            if capture is not None:
                outcome.update(await self._capture(request, begun, capture))
        except CaptureFailed as failed:
            kind = "not_sent" if failed.unavailable else "capture_failed"
            await record(started, {**outcome, "kind": kind, "reason": str(failed)})
            if failed.unavailable:
                return not_sent_result(request, str(failed))
            return capture_failed_result(request, str(failed))
        except anyio.get_cancelled_exc_class():  # the client went away before the call was sent
            await record(started, {**outcome, "kind": "not_sent", "reason": GONE_BEFORE_SENT})
            raise
        sent = await self._sent(
            request,
            record,
            started,
            outcome,
            lambda: self.downstreams.call_tool(
                request.server, request.tool, request.arguments, relay=request.relay, meta=meta
            ),
        )
        if isinstance(sent, NotAnswered):
            return sent.result
        result = sent
        answer = self.downstreams.scrub(
            request.server, result.model_dump(by_alias=True, exclude_none=True, mode="json")
        )
        after = after_read(capture) if capture is not None else None
        made = self._made_read_spec(request) if capture is None else None
        # A captured call is read again even when it answered an error: an error does not prove nothing changed
        # (a batch that failed half-way), and the read after shows whether it did. One without a capture (a
        # create) reads what it made, from its answer.
        if (after is not None and outcome.get("captured")) or (made is not None and not result.is_error):
            made_by = {"result": payload_of(answer).value} if made is not None else {}
            with anyio.CancelScope(shield=True):  # the call was answered: a client gone now must not lose its record
                outcome.update(await self._read_after(request, begun, made or after or {}, made_by))
        await record(started, {**outcome, "kind": "answered", "result": answer, "is_error": bool(result.is_error)})
        return result  # exactly what the downstream answered

    async def forward_plain(
        self, request: ProxiedCall, begun: dict[str, Any], record: Recorder
    ) -> dict[str, Any] | types.CallToolResult:
        """The fast path's forward (sagas.protocols.proxy.fast_calls) of a call with no capture read and no read
        after: the result as JSON, exactly as the server sent it (the journal keeps it scrubbed), or the answer
        written for the agent when it was not sent or its outcome is unknown. A JSON-RPC error of the server is
        raised as MCPError, as `forward` raises it."""
        meta = {**request.meta, IDEMPOTENCY_META_KEY: begun["step_id"]}
        params = {"name": request.tool, "arguments": request.arguments, "_meta": meta}
        started = time.monotonic()
        outcome: dict[str, Any] = {"max_result_bytes": self.max_result_bytes}
        sent = await self._sent(
            request,
            record,
            started,
            outcome,
            lambda: self.downstreams.call_plain(request.server, params, relay=request.relay),
        )
        if isinstance(sent, NotAnswered):
            return sent.result
        answer = self.downstreams.scrub(request.server, sent)
        await record(started, {**outcome, "kind": "answered", "result": answer, "is_error": bool(sent.get("isError"))})
        return sent

    async def _sent(
        self,
        request: ProxiedCall,
        record: Recorder,
        started: float,
        outcome: dict[str, Any],
        send: Callable[[], Awaitable[Sent]],
    ) -> Sent | NotAnswered:
        """What `send()` answered; a call not sent, lost or answered too large is recorded and answered for the
        agent (NotAnswered); the server's protocol error is recorded and raised."""
        try:
            return await send()
        except DownstreamUnavailable as down:
            await record(started, {**outcome, "kind": "not_sent", "reason": str(down)})
            return NotAnswered(not_sent_result(request, str(down)))
        except DownstreamLost as lost:
            await record(started, {**outcome, "kind": "lost", "reason": str(lost)})
            return NotAnswered(uncertain_result(request, str(lost)))
        except ResultTooLarge as oversized:
            done = {"kind": "too_large", "reason": str(oversized), "size_bytes": oversized.size_bytes}
            await record(started, {**outcome, **done})
            return NotAnswered(too_large_result(request, oversized))
        except anyio.get_cancelled_exc_class():
            # The client went away (or the proxy is stopping) while the call was out: nobody will read the answer
            # and whether the tool acted is unknown, so the step is recorded uncertain and its lease let go, not
            # left EXECUTING for as long as this process lives.
            await record(started, {**outcome, "kind": "lost", "reason": GONE_WHILE_OUT})
            raise
        except MCPError as error:
            # Scrubbed like an answer: a server may echo the secret it was started with in its error text.
            reason = str(self.downstreams.scrub(request.server, f"the server answered with a protocol error: {error}"))
            await record(started, {**outcome, "kind": "answered", "is_error": True, "reason": reason})
            raise

    def _capture_spec(self, request: ProxiedCall) -> dict[str, Any] | None:
        """The contract capture (with its outcome fields) of the tool's usable pack entry, if it declares one."""
        entry = self.pack_entry(request.server, request.tool)
        capture = entry.as_mcp_contract_parts().get("capture") if entry else None
        return {**capture, "declared_by": entry.source} if entry is not None and capture is not None else None

    async def _capture(self, request: ProxiedCall, begun: dict[str, Any], capture: dict[str, Any]) -> dict[str, Any]:
        """The pack's capture read, after the gate and before the call: what it found (the step's `pre_state`, which
        the inverse reads), or the outcome whose branch undoes the call (registry.capture_outcomes). CaptureFailed:
        no branch covers what happened, so the call is not sent."""
        where = f"the capture read {capture['tool']} (declared by {capture['declared_by']})"
        answer = await self._read(request, capture, f"{begun['step_id']}:capture", where)
        text = text_of(answer)
        read = read_outcome(capture, is_error=bool(answer.get("isError")), text=text, payload=payload_of(answer).value)
        if not proceeds(capture, read):
            said = answer_text(answer)
            if read.outcome == ABSENT:
                raise CaptureFailed(f"{where} found nothing to keep ({said[:200]}), so the call was not sent")
            if read.outcome == UNMATCHED:
                raise CaptureFailed(
                    f"{where} answered text its textPattern does not match ({said[:200]}), so the call was not sent"
                )
            raise CaptureFailed(f"{where} answered an error ({said}), so the call was not sent")
        if read.found:
            return {"captured": True, "pre_state": read.state}
        return {"capture_outcome": read.outcome}

    def _made_read_spec(self, request: ProxiedCall) -> dict[str, Any] | None:
        """The pack entry's own `readAfter` (an entry without a capture: a create's read of what it made)."""
        entry = self.pack_entry(request.server, request.tool)
        made = entry.as_mcp_contract_parts().get("read_after") if entry else None
        return dict(made) if isinstance(made, dict) else None

    async def _read_after(
        self, request: ProxiedCall, begun: dict[str, Any], read: dict[str, Any], made_by: dict[str, Any]
    ) -> dict[str, Any]:
        """The read after the call (`read_after`): the state the undo expects to find. A read that fails keeps
        nothing, and the undo falls back to comparing the call's own answer. `made_by` holds the call's answer
        payload (`result`) for a read of what a create made."""
        try:
            key = f"{begun['step_id']}:capture-after"
            answer = await self._read(request, read, key, "the read after", made_by)
        except CaptureFailed:
            return {}
        if answer.get("isError"):
            return {"read_after": True, "post_state": None}
        state = state_of(read, text=text_of(answer), payload=payload_of(answer).value)
        return {"read_after": True, "post_state": state}

    async def _read(
        self, request: ProxiedCall, capture: dict[str, Any], key: str, where: str, made_by: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        """One call of the capture tool with the call's arguments (and, for a read of what a create made, its
        answer's payload) rendered in; its answer (scrubbed, wire form)."""
        try:
            # The registry's templating renders it, as it renders every capture and compensation.
            scope = {"input": request.arguments, **(made_by or {})}
            arguments = render(capture.get("arguments", {}), scope, "capture.arguments")
            read = await self.downstreams.call_tool(
                request.server, capture["tool"], arguments, relay=request.relay, meta={IDEMPOTENCY_META_KEY: key}
            )
        except (DownstreamUnavailable, DownstreamLost) as error:
            raise CaptureFailed(f"{where} failed ({error}), so the call was not sent", unavailable=True) from None
        except (ActionFailure, ResultTooLarge, MCPError) as error:
            raise CaptureFailed(f"{where} failed ({error}), so the call was not sent") from None
        answer: dict[str, Any] = self.downstreams.scrub(
            request.server, read.model_dump(by_alias=True, exclude_none=True, mode="json")
        )
        return answer

    async def record(
        self, principal: Principal, begun: dict[str, Any], started: float, outcome: dict[str, Any]
    ) -> None:
        """Record what a forwarded call or read did (proxy_call_finish), with its duration since `started`."""
        recorded = CallOutcome.model_validate({**outcome, "duration_ms": round((time.monotonic() - started) * 1000, 3)})
        with anyio.CancelScope(shield=True):  # a client gone mid-call must not leave the outcome unrecorded
            await self.op(
                "proxy_call_finish",
                principal,
                saga_id=begun["saga_id"],
                step_id=begun["step_id"],
                fence=int(begun["fence"]),
                outcome=recorded,
            )
