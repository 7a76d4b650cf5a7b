"""What one `kind: mcp` invocation sends: the tool calls, their rendered arguments and their `_meta`.

Every tools/call carries `_meta["io.semantic-saga/idempotency_key"]` (the step id, `<step id>:rollback` for
compensation, `<key>:capture` for the capture read) and the W3C trace context, so a server that deduplicates applies
a retry once and joins the trace. Compensation templates read the forward envelope's `result` and `pre_state`; a
retry reuses the pre_state an earlier attempt captured instead of reading the state again.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, cast

from mcp.types import RequestParamsMeta
from opentelemetry import propagate

from registry.actions.context import InvocationContext
from registry.capture_outcomes import BRANCH_OF, OUTCOME_KEY
from registry.compensation_plan import compensation_scope
from registry.errors import ActionFailure
from registry.templating import render

IDEMPOTENCY_META_KEY = "io.semantic-saga/idempotency_key"


@dataclass(frozen=True)
class ToolCall:
    tool: str
    arguments: dict[str, Any]
    meta: RequestParamsMeta
    # A capture's contract (its outcome fields, registry.capture_outcomes); empty for other calls.
    spec: dict[str, Any] = field(default_factory=dict)


def kept_pre_state(ctx: InvocationContext) -> dict[str, Any]:
    """The pre_state an earlier attempt of this step captured, if its answer was lost or it failed after the
    capture. A retry must not read the state again: the earlier attempt may already have changed it, and the
    inverse would then "restore" the changed value."""
    prior = ctx.prior_receipt
    if isinstance(prior, dict) and "pre_state" in prior and "pre_state_sha256" in prior:
        return {"pre_state": prior["pre_state"], "pre_state_sha256": prior["pre_state_sha256"]}
    if isinstance(prior, dict) and prior.get(OUTCOME_KEY) in BRANCH_OF:
        return {OUTCOME_KEY: prior[OUTCOME_KEY]}  # it found nothing then: the same branch undoes the retry
    return {}


def scope(ctx: InvocationContext, compensation: bool) -> dict[str, Any]:
    names = ctx.template_scope()
    if compensation:
        # The forward result is our envelope: templates see the answer's payload as `result`, the capture's as
        # `pre_state` (registry.compensation_plan, the scope every inverse is built from).
        return compensation_scope(names, ctx.result)
    return names


def arguments(spec: dict[str, Any], names: dict[str, Any], part: str) -> dict[str, Any]:
    rendered = render(spec.get("arguments", {}), names, f"{part}.arguments")
    if not isinstance(rendered, dict):
        raise ActionFailure(
            "MCP_ARGUMENTS_INVALID",
            f"{part}.arguments rendered to a {type(rendered).__name__}, but tool arguments must be a JSON object. "
            "Nothing was sent. Fix the input (or the contract's arguments template) and retry.",
            retryable=False,
        )
    return rendered


def meta(key: str) -> RequestParamsMeta:
    carried: dict[str, Any] = {IDEMPOTENCY_META_KEY: key}
    # W3C trace context of the current span (a no-op without tracing), so the downstream server joins the trace.
    propagate.inject(carried)
    return cast(RequestParamsMeta, carried)
