"""Governance status reads: the policy in force for a tenant, its budgets and kill switches."""

from __future__ import annotations

from typing import Any

from governance.identity.principal import Principal
from governance.identity.rbac import ADMIN, READ, authorize
from governance.policy import engine as governance_policy


def policy_status(*, actor: Principal, tenant_id: str | None = None) -> dict[str, Any]:
    """Governance status for the caller's tenant; another tenant's needs the admin capability."""
    authorize(actor, READ, "policy_status")
    tenant = tenant_id or actor.tenant_id
    if tenant != actor.tenant_id:
        authorize(actor, ADMIN, "policy_status_other_tenant")
    status = governance_policy.policy_status(tenant)
    # semantic-saga-mcp's names beside ours: `enabled`, and revision "disabled" when no policy is configured.
    enabled = status["backend"] != governance_policy.BACKEND_NONE
    if not enabled and status.get("revision") is None:
        status["revision"] = "disabled"
    return {**status, "enabled": enabled}
