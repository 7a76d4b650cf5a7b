"""The inverse of a step as it would be sent: the compensation's arguments rendered from what the step kept.

One scope and one renderer (registry.templating) for everyone who builds an inverse: the MCP action when it runs a
compensation, the proxy's undo (and its dry run), and the ledger's undo plan. So a plan that cannot be built is
known as soon as the call's answer is journaled, and it says why in words a person can act on: a result that carries
no JSON (registry.tool_answers), a result kept only in part, a capture that read nothing, or a field the answer
lacks.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from registry.errors import ActionFailure
from registry.templating import render, roots_read
from registry.tool_answers import NO_JSON_REASONS, payload_of


@dataclass(frozen=True)
class InversePlan:
    """The inverse call: its tool and rendered arguments, or (arguments None) why it cannot be built."""

    tool: str
    arguments: dict[str, Any] | None
    problem: str = ""

    def as_json(self) -> dict[str, Any]:
        return {"tool": self.tool, "arguments": self.arguments, "problem": self.problem}


def compensation_scope(base: Mapping[str, Any], receipt: Any) -> dict[str, Any]:
    """`base` (input, saga, step) with the forward receipt's `result` (its payload) and `pre_state` (the capture's
    payload): the names a compensation's `${...}` templates read."""
    stored = receipt if isinstance(receipt, Mapping) else {}
    return {**base, "result": stored.get("result"), "pre_state": stored.get("pre_state")}


def inverse_plan(compensation: Mapping[str, Any], base: Mapping[str, Any], receipt: Any) -> InversePlan:
    """Render `compensation` ({"tool", "arguments"}) against `receipt` as the compensation call would."""
    tool = str(compensation.get("tool", ""))
    try:
        arguments = render(compensation.get("arguments", {}), compensation_scope(base, receipt), "compensation")
    except ActionFailure as missing:
        return InversePlan(tool, None, why_not(compensation, receipt, missing.message))
    if not isinstance(arguments, dict):
        return InversePlan(tool, None, "its arguments do not render to a JSON object")
    return InversePlan(tool, arguments)


def why_not(compensation: Mapping[str, Any], receipt: Any, message: str) -> str:
    """Why the inverse cannot be built, said from what the step kept rather than as a template error."""
    stored = receipt if isinstance(receipt, Mapping) else {}
    roots = roots_read(compensation.get("arguments", {}))
    if "result" in roots:
        result = stored.get("result")
        if stored and stored.get("truncated"):
            return (
                "cannot be undone: the result was larger than the ledger keeps (maxResultBytes), so its fields are gone"
            )
        if result is None and stored.get("result_from") == "none":
            missing = payload_of({"content": stored.get("content", [])}).missing
            return f"cannot be undone: {missing or NO_JSON_REASONS['no_text']}"
        if not stored:
            return "cannot be undone: the call left no result to read the inverse's arguments from"
    if "pre_state" in roots and stored.get("pre_state") is None:
        return "cannot be undone: the capture read before the call carries no JSON, so there is no state to restore"
    return f"cannot be undone: {message}"
