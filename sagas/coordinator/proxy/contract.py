"""The contract a proxied call's step pins: a `kind: mcp` contract derived from the downstream tool, plus a `proxy`
section keeping what the Sagaz vocabulary says about the call (docs/proxy.md, "How a call is journaled").

    {"id": "proxy.<server>.<tool>", "version": "0.0.0+<first 16 hex of the tool definition hash>", "kind": "mcp",
     "semantic": {"domain": "mcp-proxy", "operation": <tool>, "resource": "<server>/<tool>", "risk": ...,
                  "reversibility": ...},
     "input_schema": <the tool's inputSchema>, "forward": {"tool": <tool>, "arguments": "${input}"},
     "server": <the downstream's server block, secret references unresolved>,
     "execution_policy": {"forward": {"max_attempts": 1}, "failure_mode": "pause", "idempotent": false},
     "compensation"/"capture": <from the pack entry or kind: mcp contract declaring the inverse, for class R>,
     "proxy": {"server", "tool", "exposed_name", "tool_definition_hash", "pinned_definition_hash",
               "definition_changed", "definition_changes", "class", "class_source", "class_reason", "gate",
               "gate_source", "gate_reason", "inverse_source", "inverse_gates" (the gate of each tool the undo may send
               as its inverse), "method" (resources/read or prompts/get: a read by the protocol)}}

The contract part (everything but `proxy`) is validated with registry.contracts.validate_contract; the step's
`action_definition_hash` is the hash of the whole snapshot, so a later undo from another process reconnects through
registry.actions.mcp with exactly what was pinned. The class maps onto `semantic.reversibility` as: read ->
read_only, R with a declared inverse -> reversible, C and I -> irreversible (we hold no correction for a C call;
`proxy.class` keeps the C), unknown and an R without a declared inverse (a `create_*` by name) -> unknown.

`failure_mode: pause` and `idempotent: false` give the recovery sweep the outcome a proxied call needs when its
proxy dies mid-call: the step is failed as uncertain and the session waits in RECOVERY_REQUIRED; it is never sent
again (sagas.coordinator.recovery).
"""

from __future__ import annotations

import functools
import re
from typing import Any

from registry.contracts import definition_hash, validate_contract
from registry.errors import RegistryError
from registry.tool_classes import CLASS_REVERSIBILITY, CLASS_RISK
from sagas.coordinator._actions import Pinned
from sagas.errors import InvalidInput
from sagas.proxied_facts import CallFacts
from sagas.selectors.proxy_sessions import PROXY_ACTION_PREFIX

# The saga metadata key describing a proxy session (client, config, era); what makes one is Saga.kind.
SESSION_KEY = "proxy"
_NOT_IN_ID = re.compile(r"[^A-Za-z0-9_.-]+")
_LABEL_LIMIT = 200
_DESCRIPTION_LIMIT = 2000
# Forward once: a proxied call is the agent's own request, answered once; retrying is the agent's decision.
_EXECUTION_POLICY = {"forward": {"max_attempts": 1}, "failure_mode": "pause", "idempotent": False}


def action_id(server: str, tool: str) -> str:
    return _NOT_IN_ID.sub("_", f"{PROXY_ACTION_PREFIX}{server}.{tool}")[:_LABEL_LIMIT]


def snapshot(call: CallFacts) -> Pinned:
    """The pinned snapshot of one proxied call's tool (cached: a session calls the same tools again and again)."""
    return _snapshot(call.model_dump_json())


@functools.lru_cache(maxsize=512)
def _snapshot(call_json: str) -> Pinned:
    call = CallFacts.model_validate_json(call_json)
    contract = _contract(call)
    try:
        validate_contract(contract, f"proxy.{call.server}.{call.tool}")
    except RegistryError as invalid:
        raise InvalidInput(
            "PROXIED_CONTRACT_INVALID",
            f"The contract derived from {call.server}/{call.tool[:64]} does not validate: {invalid.message} "
            "Nothing was sent. Fix the downstream tool's inputSchema, or the pack or contract declaring its inverse.",
        ) from invalid
    pinned = {**contract, "proxy": _proxy_section(call)}
    return Pinned(contract["id"], contract["version"], definition_hash(pinned), pinned)


def _contract(call: CallFacts) -> dict[str, Any]:
    server, tool, effect_class = call.server, call.tool, call.effect_class
    inverse = call.inverse
    # A pack entry with an outcome that has no inverse classes the tool C or I (source "pack") and keeps its
    # inverse for the outcomes that have one (registry.capture_outcomes).
    reversible = "compensation" in inverse and (effect_class == "R" or call.class_source == "pack")
    reversibility = CLASS_REVERSIBILITY.get(effect_class, "unknown")
    if effect_class == "R" and not reversible:
        reversibility = "unknown"
    definition = call.definition
    contract: dict[str, Any] = {
        "id": action_id(server, tool),
        "version": f"0.0.0+{call.definition_hash[:16]}",
        "kind": "mcp",
        "description": str(definition.get("description") or f"{tool} on {server}, through the proxy")[
            :_DESCRIPTION_LIMIT
        ],
        "semantic": {
            "domain": "mcp-proxy",
            "operation": tool[:_LABEL_LIMIT],
            "resource": f"{server}/{tool}"[:_LABEL_LIMIT],
            "risk": CLASS_RISK.get(effect_class, "medium"),
            "reversibility": reversibility,
        },
        "input_schema": definition.get("inputSchema") or {"type": "object"},
        "forward": {"tool": tool, "arguments": "${input}"},
        "server": call.server_block,
        "execution_policy": _EXECUTION_POLICY,
    }
    if reversible:
        contract["compensation"] = inverse["compensation"]
        if "capture" in inverse:
            contract["capture"] = inverse["capture"]
        elif "read_after" in inverse:
            contract["read_after"] = inverse["read_after"]  # a create's read of what it made (no capture)
    return contract


def _proxy_section(call: CallFacts) -> dict[str, Any]:
    section: dict[str, Any] = {
        "server": call.server,
        "tool": call.tool,
        "exposed_name": call.exposed_name,
        "tool_definition_hash": call.definition_hash,
        "pinned_definition_hash": call.pinned_definition_hash,
        "definition_changed": call.definition_changed,
        "class": call.effect_class,
        "class_source": call.class_source,
        "class_reason": call.class_reason,
        "gate": call.gate,
        "gate_source": call.gate_source,
        "gate_reason": call.gate_reason,
        "inverse_source": call.inverse_source,
        "approvers": call.approvers,
        "held_as": call.held_as,
    }
    if call.inverse_gates:
        section["inverse_gates"] = {tool: dict(gate) for tool, gate in call.inverse_gates.items()}
    if call.definition_changes:
        section["definition_changes"] = list(call.definition_changes)
    if call.method:  # a read by the protocol (resources/read, prompts/get), not a tools/call
        section["method"] = call.method
    return section
