"""RBAC: which capabilities a principal holds, and the check that it holds the one a piece of work needs.

What each operation needs is said where the operation is defined: the operation table (sagas.operations.table)
for every surface's operations, checked by sagas.operations.invoke before the handler runs, and the coordinator,
selectors and kill switch for their own functions, checked again there. `authorize` names the operation only to
say, in the refusal, what was not done.

Capabilities come from roles (`viewer` < `agent` < `operator` < `admin`) and from OAuth scopes
(`semantic-saga:read|call|execute|admin`). When a token carries Semantic Saga scopes they are a ceiling: a user
whose role is admin, acting through a token scoped to `semantic-saga:read`, can only read. Without such scopes the
roles decide alone; without roles, the scopes do.

`decide` (approve or reject a node, a held proxied call included) is apart from `execute`: an `agent` (role, or a
token scoped `semantic-saga:call`) may run sagas and call tools through the MCP proxy, but never decide anything,
so an agent holding its own token cannot approve what it asked for.
"""

from __future__ import annotations

from enum import StrEnum

from governance.errors import Forbidden
from governance.identity.principal import Principal


class Capability(StrEnum):
    READ = "read"
    EXECUTE = "execute"
    DECIDE = "decide"
    ADMIN = "admin"


READ, EXECUTE, DECIDE, ADMIN = Capability.READ, Capability.EXECUTE, Capability.DECIDE, Capability.ADMIN

ROLE_CAPABILITIES: dict[str, frozenset[Capability]] = {
    "viewer": frozenset({READ}),
    "agent": frozenset({READ, EXECUTE}),
    "operator": frozenset({READ, EXECUTE, DECIDE}),
    "admin": frozenset({READ, EXECUTE, DECIDE, ADMIN}),
}
SCOPE_PREFIX = "semantic-saga:"
SCOPE_CAPABILITIES: dict[str, frozenset[Capability]] = {
    f"{SCOPE_PREFIX}read": frozenset({READ}),
    f"{SCOPE_PREFIX}call": frozenset({READ, EXECUTE}),
    f"{SCOPE_PREFIX}execute": frozenset({READ, EXECUTE, DECIDE}),
    f"{SCOPE_PREFIX}admin": frozenset({READ, EXECUTE, DECIDE, ADMIN}),
}


def capabilities(principal: Principal) -> frozenset[Capability]:
    from_roles: frozenset[Capability] = frozenset().union(
        *(ROLE_CAPABILITIES.get(r.strip().lower(), frozenset()) for r in principal.roles)
    )
    ours = [s for s in principal.scopes if s.startswith(SCOPE_PREFIX)]
    from_scopes: frozenset[Capability] = frozenset().union(*(SCOPE_CAPABILITIES.get(s, frozenset()) for s in ours))
    if principal.roles and ours:
        return from_roles & from_scopes
    return from_roles | from_scopes


def can(principal: Principal, needed: Capability) -> bool:
    return needed in capabilities(principal)


def granting(needed: Capability) -> str:
    """Every role and scope that grants `needed`, least first: "role agent, operator or admin, or scope
    semantic-saga:call, semantic-saga:execute or semantic-saga:admin" (semantic-saga-mcp's operator role and
    semantic-saga:execute scope included, which its users hold)."""
    roles = [role for role, held in ROLE_CAPABILITIES.items() if needed in held]
    scopes = [scope for scope, held in SCOPE_CAPABILITIES.items() if needed in held]
    return f"role {_either(roles)}, or scope {_either(scopes)}"


def _either(names: list[str]) -> str:
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} or {names[-1]}"


def authorize(principal: Principal, needed: Capability, operation: str) -> None:
    """Raise Forbidden, naming `operation` (what was not done), unless the principal holds the capability `needed`."""
    if needed in capabilities(principal):
        return
    held = ", ".join(sorted(capabilities(principal))) or "none"
    raise Forbidden(
        message=f"{principal.principal_id} may not {operation.replace('_', ' ')}: it needs the '{needed}' capability "
        f"({granting(needed)}), and this principal holds: {held}. Nothing was done. Ask an admin of your tenant for "
        "one of those roles, or use a token with one of those scopes.",
        operation=operation,
        capability=str(needed),
    )
