"""The result schemas of the operations: MCP's outputSchema and REST's response components, one definition.

Every answer conforms (MCP structuredContent, the A2A result artifact, REST bodies); fields may be added, never
removed, so objects allow properties beyond the ones listed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

NULLABLE_STR = {"type": ["string", "null"]}
ANY_OBJECT = {"type": "object"}


def _obj(required: dict[str, Any], **extra: Any) -> dict[str, Any]:
    """An object schema whose listed properties are required; other properties are allowed (additive evolution)."""
    return {"type": "object", "properties": {**required, **extra}, "required": sorted(required)}


STEP = _obj(
    {
        "id": {"type": "string"},
        "saga_id": {"type": "string"},
        "sequence": {"type": "integer"},
        "action": {"type": "string"},
        "action_version": {"type": "string"},
        "action_definition_hash": {"type": "string"},
        "status": {"type": "string"},
        "attempts": {"type": "integer"},
        "compensation_attempts": {"type": "integer"},
    },
    error={"type": ["object", "null"]},
)
APPROVAL = {"type": ["object", "null"]}
SHA256 = {"type": "string", "pattern": "^[0-9a-f]{64}$"}
# A waiting node's approval request as an approver judges it (sagas.selectors.approvals); null when not waiting.
APPROVAL_CONTEXT = _obj(
    {
        "approval_id": {"type": "string"},
        "risk": {"type": "string"},
        "reversibility": {"type": "string"},
        "compensation": NULLABLE_STR,
        "consequence": {"type": "string"},
        "required_by": {"enum": ["contract", "policy", "caller", "proxy"]},
        "policy_rules": {"type": "array", "items": {"type": "string"}},
        "required_because": {"type": "string"},
        "input_digest": SHA256,
        "input_digest_current": {"type": "boolean"},
        "definition_hash": SHA256,
    },
    # Left out of payload-free views (the timeline).
    input_preview={
        "type": "array",
        "items": _obj({"field": {"type": "string"}, "preview": {"type": "string"}, "folded": {"type": "boolean"}}),
    },
)
NODE = _obj(
    {
        "id": {"type": "string"},
        "action": {"type": "string"},
        "action_version": {"type": "string"},
        "status": {"type": "string"},
        "depends_on": {"type": "array", "items": {"type": "string"}},
        "approval_required": {"type": "boolean"},
        "attempts": {"type": "integer"},
        "uncertain_outcome": {"type": "boolean"},
    },
    key=NULLABLE_STR,
    approval=APPROVAL,
    step_id=NULLABLE_STR,
    approval_context={**APPROVAL_CONTEXT, "type": ["object", "null"]},
)
CHECKPOINT = _obj({"id": {"type": "string"}, "name": {"type": "string"}, "created_at": {"type": "string"}})
SAGA_SUMMARY = _obj(
    {
        "id": {"type": "string"},
        "tenant_id": {"type": "string"},
        "creator_principal_id": {"type": "string"},
        "status": {"type": "string"},
        "created_at": {"type": "string"},
        "updated_at": {"type": "string"},
    },
    # semantic-saga-mcp's error text (the message); the error object (code, message, ...) is error_detail.
    error=NULLABLE_STR,
    error_detail={"type": ["object", "null"]},
    metadata=ANY_OBJECT,
)
SAGA = {
    **SAGA_SUMMARY,
    "properties": {
        **SAGA_SUMMARY["properties"],
        "steps": {"type": "array", "items": STEP},
        "workflow": _obj(
            {"nodes": {"type": "array", "items": NODE}, "checkpoints": {"type": "array", "items": CHECKPOINT}}
        ),
    },
    "required": sorted([*SAGA_SUMMARY["required"], "steps"]),
}
RUN = {
    **SAGA,
    "properties": {
        **SAGA["properties"],
        "run": _obj(
            {
                "steps_started": {"type": "integer"},
                "node_counts": {"type": "object", "additionalProperties": {"type": "integer"}},
                "in_flight": {"type": "array", "items": ANY_OBJECT},
                "settled": {"type": "boolean"},
                "stopped_because": {"type": "string"},
            }
        ),
    },
    "required": sorted([*SAGA["required"], "run"]),
}
EVENT = _obj(
    {
        "sequence": {"type": "integer"},
        "id": {"type": "string"},
        "saga_id": {"type": "string"},
        "event_type": {"type": "string"},
        "actor_principal_id": {"type": "string"},
        "created_at": {"type": "string"},
        "event_hash": {"type": "string"},
    },
    previous_hash=NULLABLE_STR,
)
EVENTS = _obj({"saga_id": {"type": "string"}, "events": {"type": "array", "items": EVENT}})
VERIFY = _obj(
    {"saga_id": {"type": "string"}, "valid": {"type": "boolean"}, "events_checked": {"type": "integer"}},
    head_hash=NULLABLE_STR,
    failed_sequence={"type": ["integer", "null"]},
)
TIMELINE = _obj(
    {
        "saga": SAGA_SUMMARY,
        "steps": {"type": "array", "items": STEP},
        "nodes": {"type": "array", "items": NODE},
        "checkpoints": {"type": "array", "items": ANY_OBJECT},
        "events": {"type": "array", "items": EVENT},
        "integrity": VERIFY,
        # The same facts under semantic-saga-mcp's names (sagas.selectors.timeline).
        "saga_id": {"type": "string"},
        "status": {"type": "string"},
        "created_at": {"type": "string"},
        "updated_at": {"type": "string"},
        "workflow_nodes": {"type": "array", "items": NODE},
        "audit": {"type": "array", "items": EVENT},
        "audit_integrity": VERIFY,
    }
)
POLICY_STATUS = _obj(
    {"tenant_id": {"type": "string"}, "backend": {"type": "string"}, "enabled": {"type": "boolean"}},
    revision=NULLABLE_STR,
)
POLICY_DECISIONS = _obj(
    {
        "saga_id": {"type": "string"},
        "decisions": {"type": "array", "items": EVENT},
        # semantic-saga-mcp's name: POLICY_DECISION and POLICY_SAFETY_OVERRIDE events.
        "events": {"type": "array", "items": EVENT},
    }
)
ACTION = _obj(
    {
        "id": {"type": "string"},
        "version": {"type": "string"},
        "kind": {"type": "string"},
        "definition_hash": {"type": "string"},
        "semantic": ANY_OBJECT,
        "input_schema": ANY_OBJECT,
        "execution_policy": ANY_OBJECT,
    }
)
ACTIONS = _obj({"actions": {"type": "array", "items": ACTION}})
SAGA_PAGE = _obj({"sagas": {"type": "array", "items": SAGA_SUMMARY}, "next_cursor": NULLABLE_STR})
PREVIEW_REPORT = _obj(
    {
        "saga_id": {"type": "string"},
        "preview": {"type": "boolean"},
        "summary": {"type": "string"},
        "classes": {"type": "array", "items": ANY_OBJECT},
        "items": {"type": "array", "items": ANY_OBJECT},
        "would_wait_for_approval": {"type": "array", "items": ANY_OBJECT},
        "would_be_denied": {"type": "array", "items": ANY_OBJECT},
        "compensation_plan": {"type": "array", "items": ANY_OBJECT},
        "budget_impact": ANY_OBJECT,
        "audit": VERIFY,
    }
)
STEP_RESULT = {**STEP, "properties": {**STEP["properties"], "saga_status": {"type": "string"}}}
CHECKPOINT_RESULT = {**CHECKPOINT, "properties": {**CHECKPOINT["properties"], "saga_id": {"type": "string"}}}

# A node waiting for approval as the approval queue lists it: with its input, its saga and the pending request.
APPROVAL_ITEM = {
    **NODE,
    "properties": {
        **NODE["properties"],
        "saga_id": {"type": "string", "format": "uuid"},
        "saga_status": {"type": "string"},
        "input": ANY_OBJECT,
        "approval": {"type": "object"},
        "approval_context": APPROVAL_CONTEXT,
    },
    "required": sorted([*NODE["required"], "saga_id", "saga_status", "approval", "approval_context", "input"]),
}
APPROVAL_PAGE = _obj({"approvals": {"type": "array", "items": APPROVAL_ITEM}, "next_cursor": NULLABLE_STR})


@dataclass(frozen=True)
class Output:
    """An operation's result: its JSON Schema, and the name REST publishes it under (components/schemas/<name>)."""

    name: str
    schema: dict[str, Any]


OUT_SAGA = Output("Saga", SAGA)
OUT_SAGA_PAGE = Output("SagaPage", SAGA_PAGE)
OUT_RUN = Output("RunResult", RUN)
OUT_STEP = Output("StepResult", STEP_RESULT)
OUT_NODE = Output("Node", NODE)
OUT_CHECKPOINT = Output("CheckpointResult", CHECKPOINT_RESULT)
OUT_TIMELINE = Output("Timeline", TIMELINE)
OUT_EVENTS = Output("AuditEvents", EVENTS)
OUT_VERIFY = Output("AuditVerification", VERIFY)
OUT_POLICY_STATUS = Output("PolicyStatus", POLICY_STATUS)
OUT_POLICY_DECISIONS = Output("PolicyDecisions", POLICY_DECISIONS)
OUT_ACTIONS = Output("ActionList", ACTIONS)
OUT_ACTION = Output("Action", ACTION)
OUT_APPROVAL_PAGE = Output("ApprovalPage", APPROVAL_PAGE)
OUT_PREVIEW_REPORT = Output("PreviewReport", PREVIEW_REPORT)
