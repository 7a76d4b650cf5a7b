"""Undo of an MCP proxy session: a surface-less entry of the operation table that `semantic-saga undo` invokes
(sagas.coordinator.proxy.undo walks the session; docs/proxy.md, "Undo")."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from governance.identity.principal import Principal
from governance.identity.rbac import Capability
from sagas import coordinator
from sagas.operations.arguments import Args
from sagas.operations.operation import Hints, Operation
from sagas.operations.schemas import Output


class UndoArgs(Args):
    saga_id: str = Field(description="The proxy session (its saga id).")
    to_checkpoint: str = Field(default="", description="Undo only the calls made after this checkpoint.")
    dry_run: bool = Field(default=False, description="Decide and check for drift, change nothing.")
    force: bool = Field(default=False, description="Run an inverse even when the state drifted since the call.")
    reason: str = Field(default="", description="Why (kept with the session's undo requests, not in the audit chain).")


UNDO = Output(
    "ProxySessionUndo",
    {
        "type": "object",
        "properties": {
            "saga_id": {"type": "string"},
            "status": {"type": "string"},
            "dry_run": {"type": "boolean"},
            "checkpoint": {"type": "string"},
            "items": {"type": "array", "items": {"type": "object"}},
        },
        "required": ["saga_id", "status", "dry_run", "items"],
    },
)


def undo(actor: Principal, a: UndoArgs) -> dict[str, Any]:
    report = coordinator.proxy_session_undo(
        actor=actor,
        saga_id=a.saga_id,
        to_checkpoint=a.to_checkpoint,
        dry_run=a.dry_run,
        force=a.force,
        reason=a.reason,
    )
    return report.as_json()


PROXY_UNDO_OPERATIONS: list[Operation[Any]] = [
    Operation(
        "proxy_session_undo",
        "undo",
        UndoArgs,
        undo,
        Capability.EXECUTE,
        UNDO,
        "Undo a proxy session",
        "Undo a proxy session",
        hints=Hints(destructive=True),
        mcp=False,
        a2a=False,
    ),
]
