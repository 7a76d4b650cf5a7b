"""What the durable call path answers an agent for a call it did not forward: refused, recorded dry (preview), or
already carried out by an earlier request for the same held call. Each is an isError result written for an LLM,
with the facts under `_meta["io.semantic-saga/proxy"]`."""

from __future__ import annotations

from typing import Any

import mcp.types as types

from sagas.protocols.proxy.calls import PROXY_META_KEY, ProxiedCall
from sagas.proxied_facts import CallFacts


def _meta(request: ProxiedCall, begun: dict[str, Any], outcome: str) -> dict[str, Any]:
    return {
        PROXY_META_KEY: {
            "outcome": outcome,
            **begun.get("facts", {}),
            "code": begun.get("code", ""),
            "step_id": begun.get("step_id", ""),
            "saga_id": begun.get("saga_id", ""),
        }
    }


def refusal(request: ProxiedCall, begun: dict[str, Any]) -> types.CallToolResult:
    facts = begun.get("facts", {})
    why = str(begun.get("reason") or "it was refused").rstrip(".")
    klass = f" (class {facts['class']}, gate {facts.get('gate')})" if facts.get("class") else ""
    text = (
        f"{request.exposed_name} did NOT run and was not sent{klass}: {why}. Do not retry it and do not work around "
        "it with other tools or changed arguments; tell the user what you meant to do and why it was stopped, or "
        "carry on with what you may do."
    )
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=text)], is_error=True, _meta=_meta(request, begun, "refused")
    )


def dry_result(request: ProxiedCall, facts: CallFacts, begun: dict[str, Any]) -> types.CallToolResult:
    text = (
        f"PREVIEW: {request.exposed_name} was recorded, NOT executed (this session is a dry run). Outside preview it "
        f"would have had class {facts.effect_class} and gate {facts.gate}: it {begun.get('reason', 'would run')}. "
        "Nothing reached the world; keep planning as if it had worked, and do not rely on its result."
    )
    # A client checks a non-error answer against the tool's outputSchema, which a note cannot satisfy.
    has_schema = request.definition.output_schema is not None
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=text)], is_error=has_schema, _meta=_meta(request, begun, "dry")
    )


def carried_out_elsewhere(request: ProxiedCall, decision: dict[str, Any]) -> types.CallToolResult:
    """A request for a held call that an earlier request for it already carried out (a 2026-07-28 retry repeated):
    what became of it, never a second send."""
    if decision.get("step_status") == "REFUSED":
        begun = {"code": decision.get("step_code", ""), "reason": decision.get("step_reason", "")}
        return refusal(request, begun)
    text = (
        f"{request.exposed_name} was already sent by an earlier request for the same held call (its step is "
        f"{str(decision.get('step_status', '')).lower()}), and this request did not send it again. Do not call it "
        "again; its answer went to that earlier request, and the session's ledger shows its outcome."
    )
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=text)], is_error=True, _meta=_meta(request, decision, "closed")
    )
