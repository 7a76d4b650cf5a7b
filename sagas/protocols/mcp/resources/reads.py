"""What the saga resources say: URIs, templates, listings and reads, all through the operation table.

Every read is an operation (get_saga, get_saga_timeline, get_audit_events, get_action, list_sagas) invoked for the
caller, so RBAC, tenant scoping and payload safety are exactly those of the tools of the same names.
"""

from __future__ import annotations

import json
import re
import uuid
from dataclasses import dataclass
from typing import Any

import mcp.types as types
from mcp.shared.exceptions import MCPError
from mcp_types.jsonrpc import INVALID_PARAMS, INVALID_REQUEST
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from governance.errors import Forbidden, ServiceError
from governance.identity.principal import Principal
from sagas.errors import NotFound
from sagas.operations.invoke import invoke
from sagas.operations.table import OPERATIONS

MIME = "application/json"
# The 2025-11-25 spec's resource-not-found code; 2026-07-28 retired it for -32602 (SEP-2164).
RESOURCE_NOT_FOUND = -32002
PAGE_SIZE = 50

SAGA_TEMPLATE = "saga://{saga_id}"
TIMELINE_TEMPLATE = "saga://{saga_id}/timeline"
AUDIT_TEMPLATE = "saga://{saga_id}/audit"
ACTION_TEMPLATE = "action://{action_id}"

# What each URI shape reads: (operation, argument name of the id).
_VIEWS: dict[str, str] = {"": "get_saga", "/timeline": "get_saga_timeline", "/audit": "get_audit_events"}
_SAGA_URI = re.compile(r"^saga://(?P<saga_id>[^/?#]+)(?P<view>/timeline|/audit)?$")
_ACTION_URI = re.compile(r"^action://(?P<action_id>[^/?#]+)$")


@dataclass(frozen=True)
class Target:
    """A parsed resource URI: the operation that reads it and its arguments."""

    operation: str
    arguments: dict[str, Any]
    saga_id: str | None


def parse(uri: str) -> Target | None:
    if match := _SAGA_URI.match(uri):
        saga_id = match["saga_id"]
        return Target(_VIEWS[match["view"] or ""], {"saga_id": saga_id}, saga_id)
    if match := _ACTION_URI.match(uri):
        return Target("get_action", {"action": match["action_id"]}, None)
    return None


def canonical(uri: str) -> str:
    """The URI with its saga id written as ids are stored (lowercase, dashed); unchanged if it names no UUID."""
    match = _SAGA_URI.match(uri)
    if match is None:
        return uri
    try:
        saga_id = str(uuid.UUID(match["saga_id"]))
    except ValueError:
        return uri  # not an id at all: get_saga refuses it as not found
    return f"saga://{saga_id}{match['view'] or ''}"


def saga_uris(saga_id: str) -> list[str]:
    return [f"saga://{saga_id}{view}" for view in _VIEWS]


def templates() -> list[types.ResourceTemplate]:
    described = [
        (SAGA_TEMPLATE, "saga", "A saga: status, steps, workflow nodes (the DAG), approvals, checkpoints (get_saga)."),
        (TIMELINE_TEMPLATE, "saga-timeline", "A saga's payload-free timeline (get_saga_timeline)."),
        (AUDIT_TEMPLATE, "saga-audit", "A saga's hash-chained audit events, oldest first (get_audit_events)."),
        (ACTION_TEMPLATE, "action", "A registered action contract: schemas, semantics, policy (get_action)."),
    ]
    return [
        types.ResourceTemplate(uri_template=uri, name=name, description=text, mime_type=MIME)
        for uri, name, text in described
    ]


def not_found(uri: str, protocol_version: str | None, why: str) -> MCPError:
    code = INVALID_PARAMS if protocol_version in MODERN_PROTOCOL_VERSIONS else RESOURCE_NOT_FOUND
    return MCPError(code, f"Resource not found: {uri}. {why}", data={"uri": uri})


def protocol_error(refusal: ServiceError, uri: str | None, protocol_version: str | None) -> MCPError:
    """A refusal of the operation behind a resource method, as the JSON-RPC error the spec expects."""
    if isinstance(refusal, NotFound) and uri is not None:
        return not_found(uri, protocol_version, refusal.message)
    code = INVALID_REQUEST if isinstance(refusal, Forbidden) else INVALID_PARAMS
    return MCPError(code, refusal.message, data={"code": refusal.code, **({"uri": uri} if uri else {})})


def read(principal: Principal, uri: str) -> types.ReadResourceResult:
    """ORM unit: the resource's JSON, read by its operation for `principal` (raises ServiceError or LookupError)."""
    target = parse(uri)
    if target is None:
        raise LookupError(uri)
    answer = invoke(OPERATIONS[target.operation], principal, target.arguments)
    text = json.dumps(answer, ensure_ascii=False, default=str)
    return types.ReadResourceResult(
        contents=[types.TextResourceContents(uri=uri, mime_type=MIME, text=text)], ttl_ms=0, cache_scope="private"
    )


def listing(principal: Principal, cursor: str | None) -> types.ListResourcesResult:
    """ORM unit: the caller's tenant's sagas, newest first, one page (list_sagas' own keyset cursor)."""
    page = invoke(OPERATIONS["list_sagas"], principal, {"limit": PAGE_SIZE, "cursor": cursor})
    resources = [
        types.Resource(
            uri=f"saga://{saga['id']}",
            name=f"saga {saga['id']}",
            title=f"Saga {saga['id'][:8]} ({saga['status']})",
            description=f"A saga in {saga['status']}, created {saga['created_at']} by {saga['creator_principal_id']}.",
            mime_type=MIME,
        )
        for saga in page["sagas"]
    ]
    return types.ListResourcesResult(
        resources=resources, next_cursor=page["next_cursor"], ttl_ms=0, cache_scope="private"
    )
