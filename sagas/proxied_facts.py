"""The facts that cross from the MCP proxy into the coordinator, as typed models that refuse unknown fields.

The proxy (sagas.protocols.proxy) computes them, the operation table's proxy operations (sagas.operations.proxied)
validate them like every other operation's arguments, and the coordinator (proxied_calls, held_calls) acts on them:

- `SessionFacts`: what a client session is (proxy_session_open), kept in the session saga's `metadata.proxy`;
- `CallFacts`: one proxied call's tool, its class and gate and how they were decided (proxy_call_begin, release,
  withdraw), pinned into the step's contract snapshot (sagas.coordinator.proxy.contract);
- `CallOutcome`: what the downstream did with a forwarded call (proxy_call_finish).

They live below every layer that uses them and import nothing of ours.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

EffectClass = Literal["read", "R", "C", "I", "unknown"]
Gate = Literal["allow", "confirm", "block", "hide"]
# Who may decide a held call: the operators' queue, the person at the agent's client (MCP elicitation), or both
# (the first decision wins).
Approvers = Literal["operators", "client", "both"]
# How a held call waits: on an open request (leased to its proxy process), as an MCP task, or for the client to
# come back with its person's answer (2026-07-28 input_required); the last two are not leased.
HeldAs = Literal["request", "task", "elicited"]


class Facts(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ClientInfo(Facts):
    name: str | None = None
    version: str | None = None


class SessionFacts(Facts):
    client: ClientInfo = Field(default_factory=ClientInfo)
    protocol_version: str = ""
    era: Literal["2025-11-25", "2026-07-28"] = "2025-11-25"
    connection: str = ""  # the key the proxy found the session by (tenant|principal|connection or client name)
    config: str = ""  # the configuration file the proxy serves


class CallFacts(Facts):
    server: str
    tool: str  # the downstream's name (or the protocol method of a read)
    exposed_name: str  # the name the agent called
    server_block: dict[str, Any]  # the `server` block of the pinned contract (secret references unresolved)
    definition: dict[str, Any]  # the tool's definition as the downstream lists it now
    definition_hash: str
    # The definition the deployment trusts for this tool (its pin): "" when the tool has none yet.
    pinned_definition_hash: str = ""
    definition_changed: bool = False  # the definition differs from its pin, or the tool appeared after its server
    definition_changes: tuple[str, ...] = ()  # what differs, one readable line each
    effect_class: EffectClass
    class_source: str
    class_reason: str
    gate: Gate
    gate_source: str
    gate_reason: str
    inverse: dict[str, Any] = Field(default_factory=dict)  # compensation (and capture) of a declared inverse
    inverse_source: str = ""
    # The gate each tool the undo may send as this call's inverse would get as a call of its own, for this tenant
    # and client, when the call was made: {tool: {"gate", "reason"}}. The undo honours it (a blocked inverse is never
    # sent; a confirm one waits for a person).
    inverse_gates: dict[str, dict[str, str]] = Field(default_factory=dict)
    confirm_timeout_seconds: float = 120.0
    method: str = ""  # "resources/read" | "prompts/get": a read by the protocol, not a tools/call
    held_as: HeldAs = "request"
    approvers: Approvers = "operators"

    def gate_facts(self) -> dict[str, str]:
        """What an agent's client sees in `_meta` when its call does not run as asked."""
        return {
            "server": self.server,
            "tool": self.tool,
            "class": self.effect_class,
            "class_source": self.class_source,
            "gate": self.gate,
            "gate_source": self.gate_source,
            "gate_reason": self.gate_reason,
        }

    def audit_facts(self) -> dict[str, Any]:
        """Payload-free facts for the audit chain (no arguments, no results)."""
        facts: dict[str, Any] = {
            "server": self.server,
            "tool": self.tool,
            "class": self.effect_class,
            "class_source": self.class_source,
            "gate": self.gate,
        }
        if self.definition_changed:
            facts["definition_changed"] = True
        return facts


class CallOutcome(Facts):
    """`kind`: answered (with `result`, the CallToolResult as JSON, secrets scrubbed), not_sent (nothing reached the
    server), capture_failed (the pack's capture read answered an error or could not be built, so the call was not
    sent), lost (sent, the answer never came: an uncertain outcome) or too_large (it answered past the proxy's result
    limit: `size_bytes` and a `prefix` of it are all that was read)."""

    kind: Literal["answered", "not_sent", "capture_failed", "lost", "too_large"]
    result: dict[str, Any] | None = None
    is_error: bool = False
    reason: str = ""
    duration_ms: float | None = None
    max_result_bytes: int = 65536
    size_bytes: int | None = None  # too_large: how much the server sent (at least)
    captured: bool = False  # a capture read ran before the call: `pre_state` is its answer
    pre_state: Any = None
    # What the capture found (registry.capture_outcomes); absent, unmatched or failed: the pack's branch for it undoes
    # the call.
    capture_outcome: Literal["found", "absent", "unmatched", "failed"] = "found"
    read_after: bool = False  # the capture tool was read again after the call: `post_state` is what it read
    post_state: Any = None


class FinishedCall(Facts):
    """A forwarded call's outcome, recorded in the transaction that begins its session's next call (the proxy's
    fast path folds the two: sagas.protocols.proxy.pending_finishes): the step, the fence it was begun under, and
    what the downstream did."""

    step_id: str
    fence: int
    outcome: CallOutcome


class BehindRead(Facts):
    """A read answered before its step was written (sagas.protocols.proxy.behind): its facts, arguments, the step id
    it carried as idempotency key, and its outcome; several of one session are written in one transaction."""

    call: CallFacts
    arguments: dict[str, Any]
    step_id: str
    outcome: CallOutcome
