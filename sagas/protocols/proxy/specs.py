"""What a proxy configuration says, as plain values shared by the config loader, the downstream connections and
the proxy server. Loading and validating a file into these is sagas.protocols.proxy.config's job."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

Transport = Literal["stdio", "streamable_http"]
# Sagaz's reversibility classes plus `read`, in the order a cautious reader ranks them.
EffectClass = Literal["read", "R", "C", "I", "unknown"]
GateAction = Literal["allow", "confirm", "block", "hide"]


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

    def exposed_name(self, tool: str) -> str:
        return f"{self.prefix}__{tool}" if self.prefix else tool


@dataclass(frozen=True)
class ClassRule:
    """An operator's classification of a tool (glob on the tool name, optionally one server)."""

    tool: str
    effect_class: EffectClass
    server: str = ""
    reason: str = ""


@dataclass(frozen=True)
class GateRule:
    """A gate for matching tools; beats the class map. Optionally limited to one tenant or client."""

    tool: str
    action: GateAction
    server: str = ""
    tenant: str = ""
    client: str = ""


@dataclass(frozen=True)
class GatePolicy:
    # Default: an irreversible call waits for an operator, everything else flows (and is recorded).
    by_class: dict[str, GateAction] = field(
        default_factory=lambda: {"read": "allow", "R": "allow", "C": "allow", "I": "confirm", "unknown": "allow"}
    )
    tools: tuple[GateRule, ...] = ()
    confirm_timeout_seconds: float = 120.0


@dataclass(frozen=True)
class ProxyConfig:
    path: Path  # the file it came from (relative paths in it are resolved against its directory)
    servers: tuple[ServerSpec, ...]
    rules: tuple[ClassRule, ...] = ()
    gates: GatePolicy = field(default_factory=GatePolicy)
    preview: bool = False
    pack_paths: tuple[Path, ...] = ()
    max_result_bytes: int = 65536
    notes: tuple[str, ...] = ()  # things accepted but not used, said once at start (e.g. Sagaz's ledger.path)
