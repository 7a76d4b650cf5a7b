"""Every operation of the table appears on every surface it names, as the table says, and nowhere else: MCP
tools/list, A2A commands, REST routes and the published OpenAPI document, the console's saga buttons. Nothing here
restates an operation: the expectations are read from the table."""

from __future__ import annotations

from typing import Any

import pytest
from a2a.helpers import new_data_part
from a2a.types.a2a_pb2 import Message, Role
from django.test import Client
from django.urls import resolve

from sagas.operations.table import A2A_OPERATIONS, CONSOLE_BUTTONS, MCP_TOOLS, OPERATIONS, REST_ROUTES, TABLE
from sagas.protocols.a2a import commands as a2a
from sagas.protocols.mcp import server as mcp
from tests.operations.arguments import minimal_arguments

# What semantic-saga-mcp's agents call (docs/mcp.md, docs/a2a.md): renaming or dropping any of these breaks them.
SEED_TOOLS = [
    "begin_saga",
    "execute_saga_step",
    "plan_saga_step",
    "run_ready_steps",
    "approve_saga_step",
    "retry_saga_step",
    "checkpoint_saga",
    "commit_saga",
    "rollback_saga",
    "trigger_rollback",
    "get_saga",
    "get_saga_timeline",
    "get_audit_events",
    "verify_audit_chain",
    "get_policy_status",
    "get_policy_decisions",
    "list_actions",
    "get_action",
]
SEED_A2A = [
    "begin",
    "execute",
    "plan",
    "run",
    "approve",
    "retry",
    "checkpoint",
    "commit",
    "rollback",
    "get",
    "timeline",
    "audit",
    "verify_audit",
    "list_actions",
    "get_action",
    "policy_status",
    "policy_decisions",
    "list_sagas",
]
# Ours, added after the seed's (names are only ever added).
ADDED_TOOLS = ["list_sagas", "get_preview_report", "promote_preview"]
ADDED_A2A = ["preview_report", "promote"]


def test_the_tables_names_keep_the_seeds_tools_and_operations():
    assert list(MCP_TOOLS) == SEED_TOOLS + ADDED_TOOLS
    assert set(A2A_OPERATIONS) == set(SEED_A2A + ADDED_A2A)
    assert len(OPERATIONS) == len(TABLE), "two entries share an MCP name"


def test_tools_list_is_the_tables_mcp_operations_with_their_schemas_words_and_hints():
    listed = {tool.name: tool for tool in mcp.tool_list()}
    assert list(listed) == list(MCP_TOOLS)
    for name, operation in MCP_TOOLS.items():
        tool = listed[name]
        assert tool.description == operation.description
        assert tool.output_schema == operation.output.schema
        assert tool.input_schema["additionalProperties"] is False
        assert set(tool.input_schema["properties"]) == set(operation.arguments.model_fields)
        hints = tool.annotations
        assert hints is not None
        assert (hints.read_only_hint, hints.destructive_hint, hints.idempotent_hint, hints.open_world_hint) == (
            operation.hints.read_only,
            operation.hints.destructive,
            operation.hints.idempotent,
            operation.hints.open_world,
        )


@pytest.mark.parametrize("operation", [op for op in TABLE if op.a2a], ids=lambda op: op.verb)
def test_a2a_parses_each_operation_it_serves_into_the_tables_entry(operation: Any):
    body = {"operation": operation.verb, **minimal_arguments(operation.arguments)}
    command = a2a.parse_command(Message(message_id="m", role=Role.ROLE_USER, parts=[new_data_part(body)]))
    assert command.operation is operation and isinstance(command.args, operation.arguments)


def test_operations_a2a_does_not_serve_are_unknown_commands():
    for operation in (op for op in TABLE if not op.a2a):
        if operation.verb in A2A_OPERATIONS:  # another entry serves the name (trigger_rollback is rollback_saga)
            assert A2A_OPERATIONS[operation.verb] is not operation
            continue
        with pytest.raises(Exception, match=f"unknown operation '{operation.verb}'"):
            a2a.parse_command(
                Message(message_id="m", role=Role.ROLE_USER, parts=[new_data_part({"operation": operation.verb})])
            )


def _concrete(path: str) -> str:
    return "/api/v1/" + path.replace("<str:saga_id>", "0" * 8 + "-0000-0000-0000-" + "0" * 12).replace(
        "<str:node_id>", "n"
    ).replace("<str:action>", "a")


@pytest.mark.parametrize(("operation", "route"), REST_ROUTES, ids=[op.name for op, _ in REST_ROUTES])
def test_each_rest_route_resolves_and_is_published_in_the_openapi_document(operation: Any, route: Any):
    # the URL resolves to a view that answers the route's method
    match = resolve(_concrete(route.path))
    assert match.url_name == route.name and match.namespace == "sagas_api"
    assert hasattr(match.func.view_class, route.method.lower())
    # and the OpenAPI document lists it under the operation's name, status and result component
    published = _openapi()["paths"]["/api/v1/" + _openapi_path(route.path)][route.method.lower()]
    assert published["operationId"] == operation.name
    assert published["summary"] == operation.title and published["description"].startswith(operation.description)
    success = published["responses"][str(route.status)]["content"]["application/json"]["schema"]
    assert success == {"$ref": f"#/components/schemas/{operation.output.name}"}
    assert _openapi()["components"]["schemas"][operation.output.name] == operation.output.schema
    assert set(published["responses"]) == {str(route.status), *map(str, route.refusals)}


def test_the_openapi_document_has_exactly_the_tables_routes():
    published = {(method.upper(), path) for path, methods in _openapi()["paths"].items() for method in methods}
    assert published == {(route.method, "/api/v1/" + _openapi_path(route.path)) for _op, route in REST_ROUTES}


def test_the_console_buttons_name_operations_whose_arguments_they_fill():
    assert set(CONSOLE_BUTTONS) == {"run", "commit", "rollback", "retry_compensation", "resume_rollback", "promote"}
    for operation, button in CONSOLE_BUTTONS.values():
        operation.arguments.model_validate({"saga_id": "s", **button.fixed})


_DOCUMENT: dict[str, Any] = {}


def _openapi() -> dict[str, Any]:
    if not _DOCUMENT:
        response = Client().get("/api/v1/schema/", {"format": "json"})
        assert response.status_code == 200
        _DOCUMENT.update(response.json())
    return _DOCUMENT


def _openapi_path(path: str) -> str:
    return path.replace("<str:", "{").replace(">", "}")
