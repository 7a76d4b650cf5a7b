"""Tenant governance: may THIS action, resource and risk happen NOW? (DESIGN.md section 6)

Only the `none` backend exists so far: no business policy restricts anything (upgrading never silently restricts).
The JSON, OPA and Rego backends, budgets, approval thresholds and the kill switch arrive with the governance issue;
`policy_status` already answers in the shape they will fill.
"""

from __future__ import annotations

from typing import Any

BACKEND_NONE = "none"


def policy_status(tenant_id: str) -> dict[str, Any]:
    return {
        "tenant_id": tenant_id,
        "backend": BACKEND_NONE,
        "revision": None,
        "default_effect": "allow",
        "approval_at_or_above_risk": None,
        "budgets": {},
        "rule_ids": [],
        "kill_switch": False,
    }
