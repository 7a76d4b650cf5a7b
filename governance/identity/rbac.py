"""RBAC: which capability each operation needs, and which capabilities a principal holds.

One table for every surface (MCP tools, A2A operations, REST views, admin actions, commands): a surface names the
operation, and the coordinator checks it again, so no surface can grant more than the table says.

Capabilities come from roles (`viewer` < `operator` < `admin`) and from OAuth scopes
(`semantic-saga:read|execute|admin`). When a token carries Semantic Saga scopes they are a ceiling: a user whose
role is admin, acting through a token scoped to `semantic-saga:read`, can only read. Without such scopes the
roles decide alone; without roles, the scopes do.
"""

from __future__ import annotations

from enum import StrEnum

from governance.errors import Forbidden
from governance.identity.principal import Principal


class Capability(StrEnum):
    READ = "read"
    EXECUTE = "execute"
    ADMIN = "admin"


R, X, A = Capability.READ, Capability.EXECUTE, Capability.ADMIN

ROLE_CAPABILITIES: dict[str, frozenset[Capability]] = {
    "viewer": frozenset({R}),
    "operator": frozenset({R, X}),
    "admin": frozenset({R, X, A}),
}
SCOPE_PREFIX = "semantic-saga:"
SCOPE_CAPABILITIES: dict[str, frozenset[Capability]] = {
    f"{SCOPE_PREFIX}read": frozenset({R}),
    f"{SCOPE_PREFIX}execute": frozenset({R, X}),
    f"{SCOPE_PREFIX}admin": frozenset({R, X, A}),
}

# operation -> the capability it needs. Names follow the A2A operations; MCP tools map onto them.
OPERATIONS: dict[str, Capability] = {
    "begin": X,
    "execute": X,
    "plan": X,
    "run": X,
    "approve": X,
    "reject": X,
    "retry": X,
    "checkpoint": X,
    "commit": X,
    "rollback": X,
    "get": R,
    "list_sagas": R,
    "timeline": R,
    "audit": R,
    "verify_audit": R,
    "list_actions": R,
    "get_action": R,
    "policy_status": R,
    "policy_decisions": R,
    "preview_report": R,
    "promote": X,
    "load_actions": A,
    "recover": A,
    "kill_switch": A,
    "policy_status_other_tenant": A,
}


def capabilities(principal: Principal) -> frozenset[Capability]:
    from_roles: frozenset[Capability] = frozenset().union(
        *(ROLE_CAPABILITIES.get(r, frozenset()) for r in principal.roles)
    )
    ours = [s for s in principal.scopes if s.startswith(SCOPE_PREFIX)]
    from_scopes: frozenset[Capability] = frozenset().union(*(SCOPE_CAPABILITIES.get(s, frozenset()) for s in ours))
    if principal.roles and ours:
        return from_roles & from_scopes
    return from_roles | from_scopes


def can(principal: Principal, operation: str) -> bool:
    return OPERATIONS[operation] in capabilities(principal)


def authorize(principal: Principal, operation: str) -> None:
    """Raise Forbidden unless the principal holds the capability `operation` needs."""
    needed = OPERATIONS[operation]
    if needed in capabilities(principal):
        return
    held = ", ".join(sorted(capabilities(principal))) or "none"
    raise Forbidden(
        message=f"{principal.principal_id} may not {operation.replace('_', ' ')}: it needs the '{needed}' capability "
        f"(role {'operator' if needed == X else needed if needed == A else 'viewer'} or scope "
        f"{SCOPE_PREFIX}{needed}), and this principal holds: {held}. Nothing was done. Ask an admin of your "
        "tenant for the role, or use a token with that scope.",
        operation=operation,
        capability=str(needed),
    )
