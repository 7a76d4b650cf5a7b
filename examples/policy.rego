# The same rules as examples/governance_policy.json, as Rego, for SAGA_POLICY_MODE=opa (an OPA server) or
# SAGA_POLICY_MODE=rego (evaluated in-process). Query: data.semantic_saga.decision; input: the sanitized facts in
# docs/policy_governance.md. The result is {"effect", "reason", "matched_rules", "budget"}; an undefined result,
# an error or a timeout counts as deny. (Reasons are built with concat rather than sprintf("%s"): the in-process
# interpreter quotes %s strings.)
package semantic_saga

import rego.v1

revision := "2026-11-29.1"

weights := {"low": 1, "medium": 3, "high": 10, "critical": 30}

risk_order := {"low": 0, "medium": 1, "high": 2, "critical": 3}

forward_phases := {"plan", "execute", "run"}

# Budgets: acme's own (all four); every other tenant gets the wildcard section's.
budgets := {"max_steps_per_saga": 50, "max_planned_nodes": 40, "max_risk_units": 100, "max_parallel": 8} if {
	input.tenant_id == "acme"
} else := {"max_steps_per_saga": 200, "max_planned_nodes": 200, "max_parallel": 16}

deny_budget(name, wanted) := {
	"effect": "deny",
	"reason": concat("", ["hard budget ", name, " is ", format_int(budgets[name], 10), " for tenant ", input.tenant_id, "; this would make it ", format_int(wanted, 10)]),
	"matched_rules": [],
	"budget": name,
}

# 1. hard budgets, in the same order as the JSON backend
budget_decision := deny_budget("max_planned_nodes", input.saga_planned_nodes + 1) if {
	input.phase == "plan"
	input.saga_planned_nodes + 1 > budgets.max_planned_nodes
} else := deny_budget("max_steps_per_saga", input.saga_steps + 1) if {
	input.phase in {"execute", "run"}
	input.saga_steps + 1 > budgets.max_steps_per_saga
} else := deny_budget("max_risk_units", input.saga_risk_units + weights[input.risk]) if {
	input.phase in {"plan", "execute"}
	input.saga_risk_units + weights[input.risk] > budgets.max_risk_units
} else := deny_budget("max_parallel", input.requested_parallel) if {
	input.phase == "run"
	input.requested_parallel > budgets.max_parallel
}

rule(id, effect, reason) := {"effect": effect, "reason": reason, "matched_rules": [id], "budget": null}

# 2. acme's rules in order, then 3. the wildcard rules in order
rule_decision := rule("acme-no-payments-by-agents", "deny", "payments are not run by agents in this tenant; ask the finance team") if {
	input.tenant_id == "acme"
	input.domain == "payments"
	input.principal_type == "agent"
	input.phase in {"execute", "run"}
} else := rule("acme-approvers-only", "deny", "only operators and admins may approve") if {
	input.tenant_id == "acme"
	input.phase == "approve"
	count({r | some r in input.roles; r in {"operator", "admin"}}) == 0
} else := rule("no-critical-deletes", "deny", "critical deletions are never automated") if {
	input.operation == "delete"
	input.risk == "critical"
} else := rule("read-only-always", "allow", "rule read-only-always matched") if {
	input.phase in forward_phases
	input.operation in {"read", "noop"}
}

# 4. approval thresholds: irreversible (or unknown) everywhere, then acme's risk threshold
threshold_decision := {
	"effect": "require_approval",
	"reason": concat("", [input.action, " is ", input.reversibility, ": a person must approve it before it runs"]),
	"matched_rules": [concat(":", ["reversibility", input.reversibility])],
	"budget": null,
} if {
	input.phase in forward_phases
	input.reversibility in {"irreversible", "unknown"}
} else := {
	"effect": "require_approval",
	"reason": concat("", ["risk ", input.risk, " is at or above the approval threshold high"]),
	"matched_rules": ["threshold:high"],
	"budget": null,
} if {
	input.phase in forward_phases
	input.tenant_id == "acme"
	risk_order[input.risk] >= risk_order.high
}

# 5. the default effect: the wildcard section allows
default_decision := {"effect": "allow", "reason": "no rule matched; the default effect is allow", "matched_rules": [], "budget": null}

decision := d if {
	d := budget_decision
} else := d if {
	d := rule_decision
} else := d if {
	d := threshold_decision
} else := default_decision
