"""Policy facts for tests: alice, an acme operator, planning a low-risk compensable card charge, unless overridden."""

from __future__ import annotations

from typing import Any

from governance.policy.facts import PolicyInput


def policy_facts(**overrides: Any) -> PolicyInput:
    base: dict[str, Any] = {
        "tenant_id": "acme",
        "principal_id": "alice",
        "principal_type": "user",
        "roles": frozenset({"operator"}),
        "scopes": frozenset(),
        "phase": "plan",
        "action": "charge_card",
        "domain": "payments",
        "operation": "charge",
        "resource": "card",
        "risk": "low",
        "reversibility": "compensable",
    }
    base.update(overrides)
    return PolicyInput(**base)
