"""What the proxied-call functions share: the answer the proxy acts on (`Begun`) and the REFUSED step of a call that
is not sent."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

from audit.models import EventType as E
from sagas.coordinator._actions import Pinned
from sagas.coordinator._steps import journal_step
from sagas.coordinator._tx import Tx
from sagas.models import Node
from sagas.states import StepStatus

# Leases this process keeps alive while a proxied call is out on the proxy's event loop (by step id), or while a
# held call waits on an open request (by node id).
KEPT_LEASES: dict[uuid.UUID, int] = {}


@dataclass(frozen=True)
class Begun:
    """What the proxy does next with a call, and the facts it tells the agent (`_meta`) when it does not run."""

    outcome: str  # "forward" | "held" | "dry" | "refused"
    saga_id: str
    step_id: str = ""
    node_id: str = ""
    fence: int = 0
    code: str = ""  # why it was refused: GATE_BLOCKED, POLICY_DENIED, KILL_SWITCH_ENGAGED, ...
    reason: str = ""
    facts: dict[str, Any] = field(default_factory=dict)


def refuse(
    tx: Tx,
    pinned: Pinned,
    arguments: dict[str, Any],
    *,
    code: str,
    reason: str,
    facts: dict[str, Any],
    audit: dict[str, Any],
    node: Node | None = None,
    **named: Any,
) -> Begun:
    """Journal a call that is not sent: a REFUSED step (linked to its held node, if any). Audit STEP_REFUSED with
    `audit` (payload-free); `facts` are what the agent is told; `named` may give the step's id."""
    error = {"code": code, "message": reason, "uncertain": False, "sent": False}
    step = journal_step(tx, pinned, arguments, node, status=StepStatus.REFUSED, attempts=0, error=error, **named)
    if node is not None:
        tx.update(node, step=step)
    tx.record(E.STEP_REFUSED, step=step, status=StepStatus.REFUSED, data={"code": code, **audit})
    return Begun(
        "refused",
        str(tx.saga.id),
        step_id=str(step.id),
        node_id=str(node.id) if node else "",
        code=code,
        reason=reason,
        facts=facts,
    )


def pinned_facts(section: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(what the agent is told, what the audit keeps) from a snapshot's `proxy` section, for a call whose proxy is
    gone (only what was pinned is known)."""
    told: dict[str, Any] = {key: section.get(key, "") for key in ("server", "tool", "class", "class_source", "gate")}
    told.update(gate_source=section.get("gate_source", ""), gate_reason=section.get("gate_reason", ""))
    audit: dict[str, Any] = {k: section[k] for k in ("server", "tool", "class", "class_source", "gate") if k in section}
    return told, audit
