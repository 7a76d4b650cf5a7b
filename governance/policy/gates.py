"""Gates: what happens to a proxied tool call once it has a class (registry.tool_classes), before it runs.

    allow     forward it (and record it, like every call)
    confirm   hold it for an operator's approval (a timeout counts as denied)
    block     record the attempt and answer without forwarding
    hide      block, and also leave the tool out of tools/list (the agent never sees it)

Precedence, first hit wins:
  1. `policy.tools`, in file order: the first rule whose every given filter matches. Filters: `tool` (a name or a
     glob, `*` any run and `?` one character, as the downstream server names the tool), `server`, `class`,
     `tenant`, `client`. A rule scoped to a tenant or client applies only to calls of that tenant or client.
     First match rather than "most specific" because it is what Sagaz does (its files keep working) and because
     an operator can read the outcome off the file: put an exception above the general rule it carves out of.
  2. `policy.class`: the operator's map, overriding the factory map key by key.
  3. the factory map: I -> confirm, everything else -> allow.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from typing import Any, Literal

GateAction = Literal["allow", "confirm", "block", "hide"]
GATE_ACTIONS: tuple[GateAction, ...] = ("allow", "confirm", "block", "hide")
# definition_changed: raised to confirm because the tool's definition is not its pin (sagas.protocols.proxy.trust).
GateSource = Literal["tool_rule", "class_map", "default", "definition_changed"]
# The guardian default: an irreversible call waits for an operator; the rest flows and is only recorded
# (`unknown` flows too, so a `delete_*` runs while a `transfer_*` waits; `"unknown": "confirm"` is one line away).
DEFAULT_CLASS_GATES: Mapping[str, GateAction] = {
    "read": "allow",
    "R": "allow",
    "C": "allow",
    "I": "confirm",
    "unknown": "allow",
}
# policy.confirmTimeoutMs's default: two minutes, then the held call is denied.
DEFAULT_CONFIRM_TIMEOUT_SECONDS = 120.0


@dataclass(frozen=True)
class GateRule:
    """A gate for matching calls; beats the class map. An empty filter matches anything. `approver` says who
    decides the calls it holds ("" = the policy's)."""

    action: GateAction
    tool: str = "*"
    server: str = ""
    effect_class: str = ""
    tenant: str = ""
    client: str = ""
    reason: str = ""
    approver: str = ""

    def matches(self, *, effect_class: str, tool: str, server: str, tenant: str, client: str) -> bool:
        return (
            fnmatchcase(tool, self.tool)
            and self.server in ("", server)
            and self.effect_class in ("", effect_class)
            and self.tenant in ("", tenant)
            and self.client in ("", client)
        )

    def describe(self) -> str:
        filters = [f"{name} {value}" for name, value in self._filters() if value]
        return " ".join(filters)

    def _filters(self) -> tuple[tuple[str, str], ...]:
        return (
            ("tool", self.tool),
            ("server", self.server),
            ("class", self.effect_class),
            ("tenant", self.tenant),
            ("client", self.client),
        )


@dataclass(frozen=True)
class GatePolicy:
    # The operator's class map only; classes it leaves out fall back to DEFAULT_CLASS_GATES.
    by_class: Mapping[str, GateAction] = field(default_factory=dict)
    tools: tuple[GateRule, ...] = ()
    confirm_timeout_seconds: float = DEFAULT_CONFIRM_TIMEOUT_SECONDS
    # Who decides a held call unless its rule says: operators, client (MCP elicitation) or both; "" = the proxy's
    # default for its transport (both over stdio, operators over HTTP).
    approver: str = ""


@dataclass(frozen=True)
class GateDecision:
    action: GateAction
    source: GateSource
    reason: str  # said to the agent when the call does not run, and recorded with the call
    approver: str = ""  # the deciding rule's approver ("" = the policy's)


def gate_for(effect_class: str, tool: str, server: str, tenant: str, client: str, policy: GatePolicy) -> GateDecision:
    """The gate for one call of `tool` (the downstream's name for it) on `server`, by the precedence above."""
    for index, rule in enumerate(policy.tools):
        if rule.matches(effect_class=effect_class, tool=tool, server=server, tenant=tenant, client=client):
            reason = rule.reason or f"policy.tools[{index}] ({rule.describe()}) -> {rule.action}"
            return GateDecision(rule.action, "tool_rule", reason, rule.approver)
    if effect_class in policy.by_class:
        action = policy.by_class[effect_class]
        return GateDecision(action, "class_map", f"class {effect_class}; policy.class {effect_class} -> {action}")
    # A class this map does not know (a newer classifier) waits for an operator rather than flowing unseen.
    action = DEFAULT_CLASS_GATES.get(effect_class, "confirm")
    return GateDecision(action, "default", f"class {effect_class}; default policy: class {effect_class} -> {action}")


def gate_policy(raw: Mapping[str, Any]) -> GatePolicy:
    """The gates of a proxy configuration's `policy` object (already validated by its schema)."""
    timeout_ms = raw.get("confirmTimeoutMs")
    return GatePolicy(
        by_class=dict(raw.get("class", {})),
        tools=tuple(
            GateRule(
                action=rule["action"],
                tool=rule.get("tool", "*"),
                server=rule.get("server", ""),
                effect_class=rule.get("class", ""),
                tenant=rule.get("tenant", ""),
                client=rule.get("client", ""),
                reason=rule.get("reason", ""),
                approver=rule.get("approver", ""),
            )
            for rule in raw.get("tools", [])
        ),
        confirm_timeout_seconds=timeout_ms / 1000 if timeout_ms is not None else DEFAULT_CONFIRM_TIMEOUT_SECONDS,
        approver=raw.get("approver", ""),
    )


def hidden(effect_class: str, tool: str, server: str, tenant: str, client: str, policy: GatePolicy) -> bool:
    """Whether tools/list leaves `tool` out for this tenant and client (its gate is `hide`)."""
    return gate_for(effect_class, tool, server, tenant, client, policy).action == "hide"
