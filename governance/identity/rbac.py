"""RBAC: which capabilities a principal holds, and the check that it holds the one a piece of work needs.

What each operation needs is said where the operation is defined: the operation table (sagas.operations.table)
for every surface's operations, checked by sagas.operations.invoke before the handler runs, and the coordinator,
selectors and kill switch for their own functions, checked again there. `authorize` names the operation only to
say, in the refusal, what was not done.

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


READ, EXECUTE, ADMIN = Capability.READ, Capability.EXECUTE, Capability.ADMIN

ROLE_CAPABILITIES: dict[str, frozenset[Capability]] = {
    "viewer": frozenset({READ}),
    "operator": frozenset({READ, EXECUTE}),
    "admin": frozenset({READ, EXECUTE, ADMIN}),
}
SCOPE_PREFIX = "semantic-saga:"
SCOPE_CAPABILITIES: dict[str, frozenset[Capability]] = {
    f"{SCOPE_PREFIX}read": frozenset({READ}),
    f"{SCOPE_PREFIX}execute": frozenset({READ, EXECUTE}),
    f"{SCOPE_PREFIX}admin": frozenset({READ, EXECUTE, ADMIN}),
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


def can(principal: Principal, needed: Capability) -> bool:
    return needed in capabilities(principal)


def authorize(principal: Principal, needed: Capability, operation: str) -> None:
    """Raise Forbidden, naming `operation` (what was not done), unless the principal holds the capability `needed`."""
    if needed in capabilities(principal):
        return
    held = ", ".join(sorted(capabilities(principal))) or "none"
    raise Forbidden(
        message=f"{principal.principal_id} may not {operation.replace('_', ' ')}: it needs the '{needed}' capability "
        f"(role {'operator' if needed == EXECUTE else needed if needed == ADMIN else 'viewer'} or scope "
        f"{SCOPE_PREFIX}{needed}), and this principal holds: {held}. Nothing was done. Ask an admin of your "
        "tenant for the role, or use a token with that scope.",
        operation=operation,
        capability=str(needed),
    )
