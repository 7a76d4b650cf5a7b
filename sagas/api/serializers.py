"""What the REST API accepts and answers, described once.

Request bodies and query strings are validated by the MCP tool table's strict pydantic models (plus the few
REST-only models below), so REST refuses exactly what MCP refuses. Response bodies are the MCP tools' output
schemas, published as named OpenAPI components. The helpers here turn both into drf-spectacular annotations.
"""

from __future__ import annotations

import copy
import typing
from datetime import datetime
from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse
from pydantic import BaseModel, Field, field_validator

from sagas.protocols import mcp_schemas as out
from sagas.protocols.mcp_tools import ApproveArgs, Args, ListSagasArgs
from sagas.states import SagaStatus

# --- REST-only arguments -------------------------------------------------------------------------------------------


class ListSagasQuery(ListSagasArgs):
    status: str | None = Field(
        default=None, description="Only sagas in this status.", json_schema_extra={"enum": list(SagaStatus.values)}
    )
    created_after: datetime | None = Field(
        default=None, description="Only sagas created after this ISO 8601 time (no offset = UTC)."
    )
    created_before: datetime | None = Field(
        default=None, description="Only sagas created before this ISO 8601 time (no offset = UTC)."
    )
    action: str | None = Field(default=None, description="Only sagas with a node or step of this action id.")

    @field_validator("created_after", "created_before", mode="before")
    @classmethod
    def _iso_8601(cls, value: object) -> object:
        # Only ISO 8601 text: pydantic alone would also read "0.5" as a Unix timestamp.
        if isinstance(value, str):
            try:
                return datetime.fromisoformat(value)
            except ValueError:
                raise ValueError("must be an ISO 8601 timestamp such as 2025-01-31T12:00:00Z") from None
        return value


class ApprovalsQuery(Args):
    limit: int = Field(default=100, ge=1, le=500, description="Approvals per page.")
    cursor: str | None = Field(default=None, description="next_cursor from the previous page.")


class RejectArgs(ApproveArgs):
    # A rejection stops the saga (RECOVERY_REQUIRED): whoever picks it up next needs to know why.
    reason: str = Field(min_length=1, max_length=4000, description="Why; kept with the decision, never audited.")


# --- response components -------------------------------------------------------------------------------------------

ERROR = {
    "type": "object",
    "properties": {
        "error": {
            "type": "object",
            "properties": {
                "code": {"type": "string", "description": "Stable: clients branch on it."},
                "message": {"type": "string", "description": "What happened, what did not, what to do next."},
            },
            "required": ["code", "message"],
        }
    },
    "required": ["error"],
}
APPROVAL_ITEM = {
    **out.NODE,
    "properties": {
        **out.NODE["properties"],
        "saga_id": {"type": "string", "format": "uuid"},
        "saga_status": {"type": "string"},
        "input": out.ANY_OBJECT,
        "approval": {"type": "object"},
        "approval_context": out.APPROVAL_CONTEXT,
    },
    "required": sorted([*out.NODE["required"], "saga_id", "saga_status", "approval", "approval_context", "input"]),
}
APPROVAL_PAGE = {
    "type": "object",
    "properties": {"approvals": {"type": "array", "items": APPROVAL_ITEM}, "next_cursor": out.NULLABLE_STR},
    "required": ["approvals", "next_cursor"],
}

COMPONENTS: dict[str, dict[str, Any]] = {
    "Saga": out.SAGA,
    "SagaPage": out.SAGA_PAGE,
    "RunResult": out.RUN,
    "StepResult": out.STEP_RESULT,
    "Node": out.NODE,
    "CheckpointResult": out.CHECKPOINT_RESULT,
    "Timeline": out.TIMELINE,
    "AuditEvents": out.EVENTS,
    "AuditVerification": out.VERIFY,
    "PolicyStatus": out.POLICY_STATUS,
    "PolicyDecisions": out.POLICY_DECISIONS,
    "ActionList": out.ACTIONS,
    "Action": out.ACTION,
    "ApprovalPage": APPROVAL_PAGE,
    "PreviewReport": out.PREVIEW_REPORT,
    "Error": ERROR,
}


def ref(name: str) -> dict[str, str]:
    assert name in COMPONENTS, name
    return {"$ref": f"#/components/schemas/{name}"}


ERROR_DESCRIPTIONS = {
    400: "Invalid arguments or body (error.problems lists each finding). Nothing was done.",
    401: "No valid bearer token (WWW-Authenticate says why). Nothing was read or changed.",
    403: "The principal lacks the capability, or tenant policy refused. Nothing was done.",
    404: "Saga, node or action not found (another tenant's saga is indistinguishable from a missing one).",
    409: "Refused in the saga's current state (error.code says which rule). Nothing was changed.",
    415: "The body was not sent as application/json.",
    422: "The action ran and failed; error.saga_status says how the saga reacted.",
}
READ_ERRORS = (400, 401, 403, 404)
WRITE_ERRORS = (400, 401, 403, 404, 409, 415)


def responses(code: int, component: str, errors: tuple[int, ...], description: str = "") -> dict[int, Any]:
    """The success answer (a named component) and the documented refusals, all {"error": {...}}."""
    description = description or ("Created." if code == 201 else "OK.")
    answer: dict[int, Any] = {code: OpenApiResponse(response=ref(component), description=description)}
    for error in errors:
        answer[error] = OpenApiResponse(response=ref("Error"), description=ERROR_DESCRIPTIONS[error])
    return answer


# --- request bodies and query parameters from the pydantic models ---------------------------------------------


def _clean(schema: dict[str, Any]) -> dict[str, Any]:
    schema = copy.deepcopy(schema)
    schema.pop("title", None)
    for prop in schema.get("properties", {}).values():
        prop.pop("title", None)
    return schema


def request_body(model: type[BaseModel], *, exclude: tuple[str, ...] = ("saga_id",)) -> dict[str, Any]:
    """The JSON body schema: the model's fields minus those the URL carries (or the endpoint fixes)."""
    schema = _clean(model.model_json_schema())
    for name in exclude:
        schema["properties"].pop(name, None)
    required = [name for name in schema.get("required", []) if name not in exclude]
    if required:
        schema["required"] = required
    else:
        schema.pop("required", None)
    return {"application/json": schema}


def _query_schema(prop: dict[str, Any]) -> dict[str, Any]:
    """A query string has no null: `X | None` becomes X, and a null default means "absent"."""
    prop = dict(prop)
    variants = [v for v in prop.pop("anyOf", []) if v.get("type") != "null"]
    if len(variants) == 1:
        prop.update(variants[0])
    if prop.get("default", 0) is None:
        prop.pop("default")
    prop.pop("description", None)
    return prop


def list_fields(model: type[BaseModel]) -> set[str]:
    return {name for name, f in model.model_fields.items() if typing.get_origin(f.annotation) is list}


def query_parameters(model: type[BaseModel], *, exclude: tuple[str, ...] = ("saga_id",)) -> list[OpenApiParameter]:
    schema = _clean(model.model_json_schema())
    required = set(schema.get("required", []))
    return [
        OpenApiParameter(
            name,
            type=_query_schema(prop),
            location=OpenApiParameter.QUERY,
            required=name in required,
            description=model.model_fields[name].description or "",
            explode=True if name in list_fields(model) else None,
        )
        for name, prop in schema["properties"].items()
        if name not in exclude
    ]


SAGA_ID = OpenApiParameter(
    "saga_id", OpenApiTypes.UUID, OpenApiParameter.PATH, description="The saga's id (from POST /api/v1/sagas/)."
)
NODE_ID = OpenApiParameter(
    "node_id",
    {"type": "string", "pattern": "^[^/]+$"},
    OpenApiParameter.PATH,
    description="The node's id, or the key it was planned with.",
)
ACTION_ID = OpenApiParameter(
    "action",
    {"type": "string", "pattern": "^[A-Za-z][A-Za-z0-9_.-]*$"},
    OpenApiParameter.PATH,
    description="A registered action id (GET /api/v1/actions/).",
)
