"""The small facts a transition's audit event carries: what semantic-saga-mcp's event for the same moment holds.

An auditor's query written against the seed reads `data.attempts` of a compensation, `data.decision` of an
approval, `data.retry_count` of a step; these are taken from the row the transition just wrote, so they cost no
query. They are payload-free like every audit field: counts, flags, an error code, never a value or a reason's words.
"""

from __future__ import annotations

from typing import Any

from audit.models import EventType as E
from sagas.models import Approval, Node, Saga, Step

_STEP_OUTCOMES = frozenset({E.STEP_COMPLETED, E.STEP_FAILED})
_COMPENSATION_OUTCOMES = frozenset({E.COMPENSATION_COMPLETED, E.COMPENSATION_FAILED})
_DECISIONS: dict[str, str] = {E.APPROVAL_GRANTED: "approved", E.APPROVAL_REJECTED: "rejected"}
_NODE_MOVES = frozenset({E.NODE_READY, E.NODE_BLOCKED, E.NODE_COMPLETED, E.NODE_FAILED, E.NODE_RECOVERED})


def transition_facts(obj: Saga | Node | Step | Approval, event: str) -> dict[str, Any]:
    """The seed's data fields for `event`, recorded as `obj` moved (its fields already hold the new values)."""
    if isinstance(obj, Approval):
        if event not in _DECISIONS:
            return {"approval_id": str(obj.id)}
        return {"approval_id": str(obj.id), "decision": _DECISIONS[event], "reason_present": bool(obj.reason)}
    if isinstance(obj, Step):
        return _step_facts(obj, event)
    if isinstance(obj, Node) and event in _NODE_MOVES:
        return {"attempts": obj.attempts, "uncertain_outcome": bool(obj.uncertain_outcome)}
    return {}


def _step_facts(step: Step, event: str) -> dict[str, Any]:
    if event in _STEP_OUTCOMES:
        facts: dict[str, Any] = {"attempts": step.attempts, "retry_count": max(0, step.attempts - 1)}
        if event == E.STEP_FAILED and isinstance(step.error, dict) and step.error.get("code"):
            facts["error_type"] = str(step.error["code"])
        return facts
    if event in _COMPENSATION_OUTCOMES:
        return {"attempts": step.compensation_attempts}
    return {}


def planned_facts(*, dependencies: int, approval_required: bool, key: str | None) -> dict[str, Any]:
    """NODE_PLANNED's facts beside our `depends_on`: the seed's dependency count and approval flag."""
    return {"dependency_count": dependencies, "approval_required": approval_required, "key": key}
