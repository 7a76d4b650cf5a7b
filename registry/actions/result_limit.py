"""SAGA_MAX_ACTION_RESULT_BYTES: the largest answer of a registered action's call that a step keeps as its result.

Checked by the HTTP action (on the body's bytes, read as a stream and abandoned past the limit) and the `kind: mcp`
action (on the canonical JSON of the tool's answer), before the answer becomes a Step.result: every later read of
the saga (get_saga, the timeline, REST, A2A) is then bounded by what was stored. A compensation's answer over the
limit is not a failure (the undo happened and nothing reads its answer as a receipt): it is kept truncated.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings

from registry.errors import ActionFailure

CODE = "RESULT_TOO_LARGE"


def limit() -> int:
    return int(settings.SAGA_MAX_ACTION_RESULT_BYTES)


def too_large(answered: str, receipt: dict[str, Any]) -> ActionFailure:
    """The forward call answered success with more than the limit: `answered` says who answered how much.

    uncertain=True, retryable=False, as for any answer that arrived but cannot be used (an MCP result that breaks
    its own output schema, MCP_RESULT_INVALID): the success says the effect most likely happened, so the step must
    not count as untouched (a rollback skips a failed step whose outcome is certain, and would leave the effect in
    place), and an automatic retry would either apply it again or, deduplicated on the idempotency key, bring back
    the same oversized answer. The receipt keeps the answer's first bytes (and an MCP capture's pre_state, which a
    compensation that reads only the prior state can still restore).
    """
    return ActionFailure(
        CODE,
        f"{answered}, more than the {limit()} bytes a step keeps as its result (SAGA_MAX_ACTION_RESULT_BYTES). "
        "The call most likely took effect: the outcome is uncertain, and it is not retried automatically. Check "
        "the target system, then roll the saga back, or retry the node (force=true) once the target answers less "
        "or SAGA_MAX_ACTION_RESULT_BYTES is raised.",
        retryable=False,
        uncertain=True,
        receipt={**receipt, "truncated": True, "limit_bytes": limit()},
    )
