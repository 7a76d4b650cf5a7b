"""Who is acting: the one Principal every surface produces and passes to the coordinator.

Token verification (static, JWT) and RBAC arrive with the identity issue; the coordinator already takes a
Principal on every call so that tenancy is never an afterthought.
"""

from __future__ import annotations

from dataclasses import dataclass, field

# The tenant used by local, single-tenant installs (CLI, stdio, the embedded default without auth).
DEFAULT_TENANT = "default"
# The surfaces agents drive (MCP over HTTP and stdio, the proxy's own, A2A): a principal arriving through one of
# them is an agent's, whatever its role, and never decides a call the MCP proxy holds (a person does).
AGENT_PROTOCOLS = frozenset({"mcp", "stdio", "mcp-proxy", "mcp-proxy-stdio", "a2a"})
# A command run with no terminal (a script, or an agent's shell running `semantic-saga` as the local operator): it
# may do what the operator may, except what only a person present decides (a `confirm` inverse of an undo).
UNATTENDED_CLI = "cli-unattended"


@dataclass(frozen=True)
class Principal:
    principal_id: str
    tenant_id: str
    principal_type: str = "user"
    roles: frozenset[str] = field(default_factory=frozenset)
    scopes: frozenset[str] = field(default_factory=frozenset)
    authenticated: bool = False
    protocol: str = "internal"

    @property
    def through_an_agent_surface(self) -> bool:
        return self.protocol in AGENT_PROTOCOLS

    def identity_metadata(self) -> dict[str, str]:
        """What the server writes into saga metadata `_identity` (caller-supplied values are discarded)."""
        return {
            "principal_id": self.principal_id,
            "tenant_id": self.tenant_id,
            "principal_type": self.principal_type,
            "protocol": self.protocol,
        }


def local_principal(protocol: str = "cli", tenant_id: str = DEFAULT_TENANT) -> Principal:
    """The operator at this machine's shell: admin of the local tenant."""
    return Principal(
        principal_id="local-operator",
        tenant_id=tenant_id,
        principal_type="service",
        roles=frozenset({"admin"}),
        authenticated=True,
        protocol=protocol,
    )


LOCAL_AGENT_ID = "local-agent"


def local_agent(protocol: str, tenant_id: str = DEFAULT_TENANT) -> Principal:
    """The agent a local MCP client runs behind `semantic-saga proxy`: it may call tools (each call journaled and
    gated) but never decide a held call, which a person decides as someone else."""
    return Principal(
        principal_id=LOCAL_AGENT_ID,
        tenant_id=tenant_id,
        principal_type="agent",
        roles=frozenset({"agent"}),
        authenticated=True,
        protocol=protocol,
    )


SYSTEM_PRINCIPAL_ID = "semantic-saga-system"


def system_principal(tenant_id: str) -> Principal:
    """The coordinator itself (recovery sweeps, automatic rollback after a failure)."""
    return Principal(
        principal_id=SYSTEM_PRINCIPAL_ID,
        tenant_id=tenant_id,
        principal_type="system",
        roles=frozenset({"admin"}),
        authenticated=True,
        protocol="internal",
    )
