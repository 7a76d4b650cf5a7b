"""The gate an inverse passes when the undo is about to send it: the strictest of what was recorded with the call
and what holds now.

The proxy records, with each call, the gate each of its possible inverses would get as a call of its own
(`inverse_gates` in the step's `proxy` section, sagas.selectors.undo_plan.inverse_gate). Between the call and its
undo two things may have changed, and neither may loosen anything:

- the inverse tool's pin (registry.tool_pins): a server that redefined the tool since (`changed`), or one nothing is
  pinned for (`pending`), gets at least `confirm`, exactly as a call of it would;
- the operator's gates: the session's proxy configuration (`metadata.proxy.config`) is read again and the inverse
  tool's recorded class is gated by its `policy` as it stands, for the session's tenant and client. A file that can
  no longer be read leaves the recorded gate (and the pin check) in force.
"""

from __future__ import annotations

import os
from functools import lru_cache
from typing import Any

from governance.policy.gates import GatePolicy, gate_for, gate_policy
from registry.models import ToolPin, ToolPinStatus
from registry.strict_json import StrictJsonError, read_strict_json
from sagas.models import Saga, Step
from sagas.selectors.undo_plan import InverseGate, inverse_gate, proxy_section

# From least to most guarded: an inverse's gate may only move along this order.
STRICTNESS = ("allow", "confirm", "block", "hide")


def gate_now(step: Step) -> InverseGate | None:
    """The gate the inverse the undo would send passes now (see the module docstring), or None where nothing was
    recorded with the call (calls journaled before inverses were gated)."""
    recorded = inverse_gate(step)
    if recorded is None:
        return None
    found = [recorded, _pinned(step, recorded.tool)]
    found.append(_configured(step, recorded.tool, _recorded_class(step, recorded.tool)))
    return max((gate for gate in found if gate is not None), key=lambda gate: STRICTNESS.index(gate.action))


def _pinned(step: Step, tool: str) -> InverseGate | None:
    server = str(proxy_section(step).get("server", ""))
    status = ToolPin.objects.filter(server=server, tool=tool).values_list("status", flat=True).first()
    if status is None or status == ToolPinStatus.APPROVED:
        return None
    why = "its server lists another definition than the one pinned" if status == "changed" else "nothing is pinned"
    return InverseGate(tool, "confirm", f"{why} for {server}/{tool} now: a person confirms it")


def _recorded_class(step: Step, tool: str) -> str:
    gates = proxy_section(step).get("inverse_gates")
    recorded = gates.get(tool) if isinstance(gates, dict) else None
    return str(recorded.get("class", "")) if isinstance(recorded, dict) else ""


def _configured(step: Step, tool: str, effect_class: str) -> InverseGate | None:
    if not effect_class:
        return None
    session = Saga.objects.filter(pk=step.saga_id).values_list("tenant_id", "metadata").first()
    if session is None:
        return None
    tenant, metadata = session
    facts = metadata.get("proxy") if isinstance(metadata, dict) else None
    if not isinstance(facts, dict) or not facts.get("config"):
        return None
    policy = _policy(str(facts["config"]))
    if policy is None:
        return None
    client = facts.get("client")
    name = str(client.get("name") or "") if isinstance(client, dict) else ""
    server = str(proxy_section(step).get("server", ""))
    decided = gate_for(effect_class, tool, server, tenant, name, policy)
    return InverseGate(tool, decided.action, f"{decided.reason} (the proxy configuration as it stands now)")


def _policy(path: str) -> GatePolicy | None:
    try:
        return _policy_of(path, os.stat(path).st_mtime_ns)
    except OSError:
        return None


@lru_cache(maxsize=64)
def _policy_of(path: str, mtime_ns: int) -> GatePolicy | None:
    """The gates of the configuration at `path` as of `mtime_ns` (read once per version of the file)."""
    try:
        document: Any = read_strict_json(path, "proxy configuration")
        return gate_policy(document.get("policy", {}) if isinstance(document, dict) else {})
    except (StrictJsonError, KeyError, TypeError, ValueError, AttributeError):
        return None
