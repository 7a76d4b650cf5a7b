"""Policy as code: the same Rego policy evaluated by an OPA server (`opa`, governance.policy.opa) or in-process
with regopy (`rego`, governance.policy.rego).

Both send the sanitized facts (PolicyInput.as_dict) as `input` and read the decision at the configured path
(default `semantic_saga/decision`). A decision is `true`/`false` or an object {effect, reason, matched_rules,
budget}. Anything else fails closed: an undefined decision, an invalid shape, an error or a timeout is a deny
(rollback and rejection never reach policy, so failing closed cannot trap work in flight).
"""

from __future__ import annotations

from typing import Any

from governance.policy.facts import DEFAULT_RISK_WEIGHTS
from registry.semantics import risk_of


class PolicyAsCode:
    """What Rego and OPA share: risk weights are the defaults (the policy owns its own budgets) and the status
    names where decisions come from instead of listing rules."""

    backend = ""
    revision: str | None = None

    def risk_units(self, risk: str) -> int:
        return DEFAULT_RISK_WEIGHTS.get(risk_of(risk), 0)

    def source(self) -> dict[str, str]:
        raise NotImplementedError

    def status(self, tenant_id: str) -> dict[str, Any]:
        return {
            "tenant_id": tenant_id,
            "backend": self.backend,
            "revision": self.revision,
            "default_effect": None,
            "approval_at_or_above_risk": None,
            "budgets": {},
            "rule_ids": [],
            **self.source(),
        }
