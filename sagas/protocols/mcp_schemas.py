"""Output JSON Schemas of the MCP tools (structuredContent always conforms; fields may be added, never removed)."""

from __future__ import annotations

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
# A waiting node's approval request as an approver judges it (sagas.approval_context); null when not waiting.
APPROVAL_CONTEXT = _obj(
    {
        "approval_id": {"type": "string"},
        "risk": {"type": "string"},
        "reversibility": {"type": "string"},
        "compensation": NULLABLE_STR,
        "consequence": {"type": "string"},
        "required_by": {"enum": ["contract", "policy", "caller"]},
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
    error={"type": ["object", "null"]},
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
    }
)
POLICY_STATUS = _obj({"tenant_id": {"type": "string"}, "backend": {"type": "string"}})
POLICY_DECISIONS = _obj({"saga_id": {"type": "string"}, "decisions": {"type": "array", "items": EVENT}})
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

OUTPUT_SCHEMAS: dict[str, dict[str, Any]] = {
    "begin_saga": SAGA,
    "execute_saga_step": STEP_RESULT,
    "plan_saga_step": NODE,
    "run_ready_steps": RUN,
    "approve_saga_step": NODE,
    "retry_saga_step": NODE,
    "checkpoint_saga": CHECKPOINT_RESULT,
    "commit_saga": SAGA,
    "rollback_saga": SAGA,
    "trigger_rollback": SAGA,
    "get_saga": SAGA,
    "get_saga_timeline": TIMELINE,
    "get_audit_events": EVENTS,
    "verify_audit_chain": VERIFY,
    "get_policy_status": POLICY_STATUS,
    "get_policy_decisions": POLICY_DECISIONS,
    "list_actions": ACTIONS,
    "get_action": ACTION,
    "list_sagas": SAGA_PAGE,
    "get_preview_report": PREVIEW_REPORT,
    "promote_preview": SAGA,
}
