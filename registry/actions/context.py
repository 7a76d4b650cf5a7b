"""What one action call knows about the saga it runs in (kept apart so handlers can import it without cycles)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class InvocationContext:
    saga_id: str
    step_id: str
    # "<step id>" for the forward call, "<step id>:rollback" for compensation: every retry of the same call
    # reuses it, so the remote side can deduplicate.
    idempotency_key: str
    input: dict[str, Any]
    # The forward result, available to compensation templates (${result.x}).
    result: Any | None = None
    attempt: int = 1
    # What an earlier attempt of this same call left as its receipt when it failed or its answer was lost (None on a
    # first attempt). An MCP action reuses the pre_state captured there instead of reading the state again, which
    # that attempt may already have changed.
    prior_receipt: Any | None = None

    def template_scope(self) -> dict[str, Any]:
        """The values `${...}` templates may reference."""
        return {
            "input": self.input,
            "result": self.result,
            "saga": {"id": self.saga_id},
            "step": {"id": self.step_id},
        }
