"""What every policy backend shares: the sanitized facts it decides on, the decision it returns, and the reading
of a decision that a policy-as-code backend (Rego, OPA) computed.

The facts are control-plane context only (who, which phase, which action and its declared semantics, counters),
never action inputs or results, so a decision can be logged and audited safely.
"""

from __future__ import annotations

import uuid
from dataclasses import asdict, dataclass, field
from typing import Any

from governance.errors import ServiceError
from registry.semantics import reversibility_of, risk_of

# "unknown" is semantic-saga-mcp's risk level below low (a contract with no risk, or a word that is none of these).
RISK_ORDER = {"unknown": -1, "low": 0, "medium": 1, "high": 2, "critical": 3}
DEFAULT_RISK_WEIGHTS = {"low": 1, "medium": 3, "high": 10, "critical": 30, "unknown": 3}
# Said where a decision has no policy revision to name (an OPA answer without one, a fail-closed deny).
NO_REVISION = "unknown"
# Phases that start or commit to new forward work: the only ones budgets and thresholds apply to.
FORWARD_PHASES = frozenset({"plan", "execute", "run"})
# Reversibility values that need approval when a tenant sets irreversible_requires_approval ("unknown" is treated
# as a mutation nobody can undo).
UNSAFE_REVERSIBILITY = frozenset({"irreversible", "unknown"})


class PolicyFileError(ServiceError):
    code = "INVALID_POLICY_FILE"


@dataclass(frozen=True)
class PolicyInput:
    """Everything a policy may look at: sanitized, payload-free, the same for every backend."""

    tenant_id: str
    principal_id: str
    principal_type: str
    roles: frozenset[str]
    scopes: frozenset[str]
    phase: str
    action: str = ""
    action_version: str = ""
    action_kind: str = ""
    domain: str = ""
    operation: str = ""
    resource: str = ""
    risk: str = "low"
    reversibility: str = "unknown"
    saga_steps: int = 0
    saga_planned_nodes: int = 0
    saga_risk_units: int = 0
    requested_parallel: int = 0
    # A proxied call only: its downstream tool's definition changed since the session began (a rug pull).
    definition_changed: bool = False

    def __post_init__(self) -> None:
        # A contract's semantic is kept as its file says; policies decide on our vocabulary (registry.semantics:
        # semantic-saga-mcp's reversibility "full" is reversible, a risk that is no level is unknown).
        object.__setattr__(self, "risk", risk_of(self.risk))
        object.__setattr__(self, "reversibility", reversibility_of(self.reversibility))

    def as_dict(self) -> dict[str, Any]:
        """The document sent to OPA and evaluated by Rego (sorted lists keep it deterministic)."""
        data = asdict(self)
        data["roles"] = sorted(self.roles)
        data["scopes"] = sorted(self.scopes)
        return data


@dataclass(frozen=True)
class Decision:
    effect: str  # allow | deny | require_approval
    reason: str
    backend: str
    revision: str | None
    matched_rules: tuple[str, ...] = ()
    budget: str | None = None
    decision_id: str = field(default_factory=lambda: str(uuid.uuid4()))

    @property
    def allowed(self) -> bool:
        return self.effect != "deny"


EFFECTS = frozenset({"allow", "deny", "require_approval"})


def decision_from_result(result: Any, *, backend: str, revision: str | None) -> Decision:
    """Read a boolean or object decision; every other shape is a fail-closed deny."""
    if isinstance(result, bool):
        effect = "allow" if result else "deny"
        return Decision(effect, f"{backend} decision {str(result).lower()}", backend, revision or NO_REVISION)
    if not isinstance(result, dict) or result.get("effect") not in EFFECTS:
        return fail_closed(backend, revision, f"the {backend} decision has an invalid shape ({type(result).__name__})")
    rules = result.get("matched_rules") or []
    return Decision(
        effect=str(result["effect"]),
        reason=str(result.get("reason") or f"{backend} decided {result['effect']}"),
        backend=backend,
        revision=str(result.get("revision") or revision or NO_REVISION),
        matched_rules=tuple(str(r) for r in rules) if isinstance(rules, list) else (),
        budget=str(result["budget"]) if result.get("budget") else None,
    )


def fail_closed(backend: str, revision: str | None, why: str) -> Decision:
    return Decision(
        "deny",
        f"{why}; forward work fails closed until policy answers",
        backend,
        revision or NO_REVISION,
        ("fail-closed",),
    )
