"""What a proxy configuration says, as plain values shared by the config loader, the downstream connections and
the proxy server. Loading and validating a file into these is sagas.protocols.proxy.config's job. The values a
classifier, a gate or a pack holds live with that code (registry.tool_classes, governance.policy.gates,
registry.packs), which never imports sagas."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from governance.policy.gates import GatePolicy
from registry.packs import PackSet
from registry.tool_classes import ClassRule
from sagas.protocols.proxy.floods import DEFAULT_BURST, DEFAULT_PER_SECOND

Transport = Literal["stdio", "streamable_http"]


@dataclass(frozen=True)
class ServerSpec:
    """One downstream MCP server. Secret references (`{"secret_ref": "env://NAME"}`) stay unresolved here: they
    are resolved when the connection is opened and never stored."""

    name: str
    transport: Transport
    command: str = ""
    args: tuple[str, ...] = ()
    env: dict[str, Any] = field(default_factory=dict)  # value: str or a secret reference object
    cwd: Path | None = None  # already resolved against the config file's directory
    url: str = ""
    headers: dict[str, Any] = field(default_factory=dict)  # value: str or a secret reference object
    prefix: str = ""  # tools are exposed as f"{prefix}__{tool}" when set
    call_timeout_seconds: float | None = None  # `timeoutMs`; None: SAGA_PROXY_CALL_TIMEOUT_SECONDS
    connect_timeout_seconds: float | None = None  # `connectTimeoutMs`; None: SAGA_PROXY_CONNECT_TIMEOUT_SECONDS
    # Its notifications beyond this rate are dropped and counted (sagas.protocols.proxy.floods).
    notifications_per_second: float = DEFAULT_PER_SECOND  # `notificationsPerSecond`
    notification_burst: int = DEFAULT_BURST  # `notificationBurst`
    # "relay": its elicitation reaches the agent in flight, marked as its own; "refuse": answered with an error
    # (sagas.protocols.proxy.inbound).
    elicitation: Literal["relay", "refuse"] = "relay"
    # How its first listing is trusted (registry.tool_pins): "first-use", "review", or "" for the deployment's
    # default (ProxyConfig.trust_for).
    trust: str = ""

    def exposed_name(self, tool: str) -> str:
        return f"{self.prefix}__{tool}" if self.prefix else tool

    def block(self) -> dict[str, Any]:
        """The pinned contract's `server` block: where a later undo reconnects (secret references stay
        references)."""
        if self.transport == "stdio":
            block: dict[str, Any] = {"transport": "stdio", "command": self.command, "args": list(self.args)}
            if self.env:
                block["env"] = dict(self.env)
            # Where the proxy started it (the configured cwd, else the proxy's own directory), so an undo run from
            # any other directory starts it the same way: relative args mean what they meant for the proxy.
            block["cwd"] = str(self.cwd if self.cwd is not None else Path.cwd())
            return block
        block = {"transport": "streamable_http", "url": self.url}
        if self.headers:
            block["headers"] = dict(self.headers)
        return block


@dataclass(frozen=True)
class ProxyConfig:
    path: Path  # the file it came from (relative paths in it are resolved against its directory)
    servers: tuple[ServerSpec, ...]
    rules: tuple[ClassRule, ...] = ()
    gates: GatePolicy = field(default_factory=GatePolicy)
    preview: bool = False
    capture: bool = True  # run compensation packs' capture reads; see PackSet.in_force
    pack_paths: tuple[Path, ...] = ()  # the pack files named by `packs`, resolved against the config's directory
    packs: PackSet = field(default_factory=PackSet)  # every pack, files and inline, loaded and validated
    max_result_bytes: int = 65536
    notes: tuple[str, ...] = ()  # things accepted but not used, said once at start (e.g. Sagaz's ledger.path)
    # How agents reach this proxy: over stdio the person at the client is the one at this machine, so held calls
    # ask that client (MCP elicitation) as well as the operators by default; over HTTP only the operators.
    served_over: Literal["stdio", "http"] = "http"

    def trust_for(self, spec: ServerSpec, deployment_default: str = "") -> str:
        """How `spec`'s first listing is trusted: the server's own `trust`, else the deployment's (SAGA_PROXY_TRUST),
        else by who the agents are. Over stdio the agent is the local operator's own, so trust on first use is
        enough; over HTTP agents are other principals', and nothing they can reach is trusted before an operator
        has reviewed it."""
        return spec.trust or deployment_default or ("first-use" if self.served_over == "stdio" else "review")
