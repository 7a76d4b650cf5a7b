"""The REST API's OpenAPI document, built from the operation table (sagas.operations.table).

Request bodies and query parameters come from each operation's strict pydantic model (minus what the URL decides),
responses from its result schema, published as a named component, plus the documented refusals, all
{"error": {...}}. drf-spectacular cannot infer these, nor our security schemes, which are declared here too.
"""

from __future__ import annotations

import copy
import typing
from typing import Any

from django.conf import settings
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.openapi import AutoSchema
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse
from pydantic import BaseModel

from sagas.operations.operation import Operation, Route
from sagas.operations.table import REST_ROUTES

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
COMPONENTS: dict[str, dict[str, Any]] = {
    **{op.output.name: op.output.schema for op, _route in REST_ROUTES},
    "Error": ERROR,
}
ERROR_DESCRIPTIONS = {
    400: "Invalid arguments or body (error.problems lists each finding). Nothing was done.",
    401: "No valid bearer token (WWW-Authenticate says why). Nothing was read or changed.",
    403: "The principal lacks the capability, or tenant policy refused. Nothing was done.",
    404: "Saga, node or action not found (another tenant's saga is indistinguishable from a missing one).",
    409: "Refused in the saga's current state (error.code says which rule). Nothing was changed.",
    415: "The body was not sent as application/json.",
    422: "The action ran and failed; error.saga_status says how the saga reacted.",
    429: "A configured quota (SAGA_MAX_NEW_SAGAS_PER_MINUTE, SAGA_MAX_CONCURRENT_RUNS_PER_TENANT) would be exceeded. "
    "Nothing was done; error.retry_after_seconds says when to try again where it is known.",
}
PATH_PARAMETERS = {
    "saga_id": OpenApiParameter(
        "saga_id", OpenApiTypes.UUID, OpenApiParameter.PATH, description="The saga's id (from POST /api/v1/sagas/)."
    ),
    "node_id": OpenApiParameter(
        "node_id",
        {"type": "string", "pattern": "^[^/]+$"},
        OpenApiParameter.PATH,
        description="The node's id, or the key it was planned with.",
    ),
    "action": OpenApiParameter(
        "action",
        {"type": "string", "pattern": "^[A-Za-z][A-Za-z0-9_.-]*$"},
        OpenApiParameter.PATH,
        description="A registered action id (GET /api/v1/actions/).",
    ),
}


def documentation(operation: Operation[Any], route: Route) -> dict[str, Any]:
    """drf-spectacular's extend_schema arguments for an operation's route."""
    in_path = route.path_arguments
    parameters = [PATH_PARAMETERS[name] for name in in_path]
    request = None
    if route.method == "GET":
        parameters += query_parameters(operation.arguments, exclude=in_path)
    else:
        request = request_body(operation.arguments, exclude=(*in_path, *route.fixed))
    return {
        "operation_id": operation.name,
        "tags": [route.tag],
        "summary": operation.title,
        "description": f"{operation.description} {route.note}".strip(),
        "parameters": parameters,
        "request": request,
        "responses": responses(route.status, operation.output.name, route.refusals),
    }


def responses(code: int, component: str, errors: tuple[int, ...]) -> dict[int, Any]:
    """The success answer (a named component) and the documented refusals, all {"error": {...}}."""
    description = "Created." if code == 201 else "OK."
    answer: dict[int, Any] = {code: OpenApiResponse(response=_ref(component), description=description)}
    for error in errors:
        answer[error] = OpenApiResponse(response=_ref("Error"), description=ERROR_DESCRIPTIONS[error])
    return answer


def _ref(name: str) -> dict[str, str]:
    assert name in COMPONENTS, name
    return {"$ref": f"#/components/schemas/{name}"}


def _clean(schema: dict[str, Any]) -> dict[str, Any]:
    schema = copy.deepcopy(schema)
    schema.pop("title", None)
    for prop in schema.get("properties", {}).values():
        prop.pop("title", None)
    return schema


def request_body(model: type[BaseModel], *, exclude: tuple[str, ...]) -> dict[str, Any]:
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
    """The fields a query string may repeat (`?event_types=A&event_types=B`)."""
    return {name for name, f in model.model_fields.items() if typing.get_origin(f.annotation) is list}


def query_parameters(model: type[BaseModel], *, exclude: tuple[str, ...]) -> list[OpenApiParameter]:
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


# --- security schemes and shared components ----------------------------------------------------------------------


class BearerTokenScheme(OpenApiAuthenticationExtension):  # type: ignore[no-untyped-call]
    target_class = "sagas.api.authentication.BearerTokenAuthentication"
    name = "bearerAuth"

    def get_security_definition(self, auto_schema: AutoSchema) -> dict[str, Any]:
        return {
            "type": "http",
            "scheme": "bearer",
            "description": "A static token (SAGA_AUTH_MODE=static) or a JWT from your identity provider "
            "(SAGA_AUTH_MODE=jwt): the same tokens /mcp and /a2a accept. Roles viewer < operator < admin, or "
            "scopes semantic-saga:read|execute|admin, decide what each endpoint allows.",
        }


class ConsoleSessionScheme(OpenApiAuthenticationExtension):  # type: ignore[no-untyped-call]
    target_class = "sagas.api.authentication.ConsoleSessionAuthentication"
    name = "consoleSession"

    def get_security_definition(self, auto_schema: AutoSchema) -> dict[str, Any]:
        return {
            "type": "apiKey",
            "in": "cookie",
            "name": settings.SESSION_COOKIE_NAME,
            "description": "A logged-in admin console session (browsable API); unsafe methods need the CSRF token.",
        }


def add_components(result: dict[str, Any], generator: Any, request: Any, public: bool) -> dict[str, Any]:
    """POSTPROCESSING_HOOKS entry: the response schemas the operations refer to by name."""
    schemas = result.setdefault("components", {}).setdefault("schemas", {})
    for name, schema in COMPONENTS.items():
        schemas.setdefault(name, schema)
    return result
