"""Validation and identity of `kind: mcp` contracts (no server needed)."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from registry.contracts import compensation_needs_result, definition_hash, validate_contract
from registry.errors import RegistryError
from tests.mcp_actions.conftest import create_contact, http_server, mcp_contract

URL = "http://127.0.0.1:9/mcp"


def _problems(contract: dict[str, Any]) -> list[str]:
    with pytest.raises(RegistryError) as caught:
        validate_contract(contract)
    assert caught.value.code == "INVALID_CONTRACT"
    return caught.value.problems


def _rename(**changes: Any) -> dict[str, Any]:
    contract = mcp_contract(
        "rename_contact",
        http_server(URL),
        {"tool": "update_contact", "arguments": {"id": "${input.id}", "name": "${input.name}"}},
        capture={"tool": "get_contact", "arguments": {"id": "${input.id}"}},
        compensation={"tool": "update_contact", "arguments": {"id": "${input.id}", "name": "${pre_state.name}"}},
        reversibility="reversible",
    )
    contract.update(changes)
    return contract


def test_mcp_contracts_with_and_without_capture_validate() -> None:
    # given a create with a delete compensation, and an update with a capture read
    # when validated / then nothing is refused
    validate_contract(create_contact(http_server(URL, headers={"Authorization": {"secret_ref": "env://CRM"}})))
    validate_contract(_rename())


def test_reversible_without_compensation_is_refused_with_what_to_do() -> None:
    # given an mcp action that claims to be reversible but declares no inverse
    contract = create_contact(http_server(URL))
    del contract["compensation"]
    # when validated
    (problem,) = _problems(contract)
    # then the message says why and what to do
    assert problem.startswith("contract: semantic.reversibility 'reversible' means the inverse is known")
    assert "add a 'compensation'" in problem and "declare 'unknown'" in problem


def test_mcp_contract_needs_a_server() -> None:
    contract = create_contact(http_server(URL))
    del contract["server"]
    assert "contract: 'server' is a required property" in _problems(contract)


@pytest.mark.parametrize(
    ("server", "expected"),
    [
        ({"transport": "carrier-pigeon"}, "contract.server.transport: 'carrier-pigeon' is not one of"),
        ({"transport": "streamable_http"}, "contract.server: 'url' is a required property"),
        ({"transport": "streamable_http", "url": "ftp://x"}, "is not the absolute http:// or https:// URL"),
        ({"transport": "stdio"}, "contract.server: 'command' is a required property"),
        ({"transport": "stdio", "command": "x", "url": URL}, "'url' was unexpected"),
        ({"transport": "stdio", "command": "x", "env": {"1BAD": "v"}}, "is not an environment variable name"),
    ],
)
def test_bad_server_blocks_are_refused_with_their_path(server: dict[str, Any], expected: str) -> None:
    contract = create_contact(server)
    problems = _problems(contract)
    assert any(expected in problem for problem in problems), problems


def test_pre_state_needs_a_capture() -> None:
    # given a compensation reading ${pre_state...} of a contract without capture
    contract = _rename()
    del contract["capture"]
    # when validated
    (problem,) = _problems(contract)
    # then
    assert problem.startswith("contract.compensation.arguments.name: '${pre_state.name}' refers to the captured")
    assert "add a capture" in problem


@pytest.mark.parametrize("part", ["forward", "capture"])
@pytest.mark.parametrize("template", ["${result.id}", "${pre_state.name}"])
def test_result_and_pre_state_are_refused_before_the_forward_call(part: str, template: str) -> None:
    contract = _rename()
    contract[part]["arguments"]["extra"] = template
    (problem,) = _problems(contract)
    assert problem.startswith(f"contract.{part}.arguments.extra: '{template}'")


def test_templates_outside_arguments_are_refused() -> None:
    # given templates in the server URL and in a tool name
    contract = _rename(server=http_server("http://127.0.0.1:9/${input.tenant}"))
    contract["forward"]["tool"] = "${input.tool}"
    # when validated
    problems = _problems(contract)
    # then both are named; only arguments are rendered
    assert (
        "contract.forward.tool: templates are only rendered in arguments; '${input.tool}' would be used literally"
        in (problems)
    )
    assert any(
        problem.startswith("contract.server.url: templates are only rendered in arguments") for problem in problems
    )


def test_arguments_may_be_one_template_yielding_an_object() -> None:
    # given the whole input as arguments (what import_mcp_tools drafts)
    contract = create_contact(http_server(URL))
    contract["forward"]["arguments"] = "${input}"
    validate_contract(contract)
    # when a template yields a string instead
    contract["forward"]["arguments"] = "${step.id}"
    # then it is refused
    (problem,) = _problems(contract)
    assert problem.startswith(
        "contract.forward.arguments: '${step.id}' yields a string, but arguments must be an object"
    )


def test_server_and_capture_belong_to_mcp_actions_only() -> None:
    contract = {
        "id": "note",
        "version": "1.0.0",
        "kind": "builtin",
        "semantic": {"domain": "d", "operation": "o", "resource": "r", "risk": "low", "reversibility": "irreversible"},
        "input_schema": {"type": "object"},
        "forward": {"builtin": "noop"},
        "server": http_server(URL),
    }
    assert _problems(contract) == [
        "contract.server: only mcp actions have a 'server' (this one is kind 'builtin'); remove it, or make the action "
        "kind mcp"
    ]


def test_an_unreviewed_draft_cannot_be_active() -> None:
    # given an imported draft
    contract = create_contact(http_server(URL))
    contract["review"] = {"draft": True, "notes": ["check me"]}
    # when it is registered active / inactive
    (problem,) = _problems(contract)
    contract["active"] = False
    validate_contract(contract)
    # then only the inactive one passes
    assert "unreviewed draft (review.draft is true), so it cannot be active" in problem


def test_compensation_reading_only_pre_state_needs_the_forward_result() -> None:
    # given a compensation that reads only the captured pre-state (persisted inside the forward result)
    contract = _rename()
    # then the coordinator must treat it as needing the forward result
    assert compensation_needs_result(contract)


_CHANGES: list[tuple[str, Callable[[dict[str, Any]], None]]] = [
    ("server url", lambda c: c["server"].update(url="http://127.0.0.1:10/mcp")),
    ("server header", lambda c: c["server"].update(headers={"Authorization": {"secret_ref": "env://OTHER"}})),
    ("transport", lambda c: c.update(server={"transport": "stdio", "command": "crm-mcp"})),
    ("forward tool", lambda c: c["forward"].update(tool="update_contact")),
    ("forward argument template", lambda c: c["forward"]["arguments"].update(name="${input.full_name}")),
    ("compensation tool", lambda c: c["compensation"].update(tool="archive_contact")),
    ("compensation arguments", lambda c: c["compensation"].update(arguments={"id": "${result.contact_id}"})),
    ("capture", lambda c: c.update(capture={"tool": "get_contact", "arguments": {"id": "${input.id}"}})),
    ("timeout", lambda c: c["forward"].update(timeout_seconds=5)),
]


@pytest.mark.parametrize(("what", "change"), _CHANGES, ids=[what for what, _ in _CHANGES])
def test_server_tool_and_argument_changes_change_the_hash(what: str, change: Callable[[dict[str, Any]], None]) -> None:
    # given a contract and a copy with one MCP detail changed
    contract = create_contact(http_server(URL))
    changed = copy.deepcopy(contract)
    change(changed)
    # when both are hashed
    # then the hash pins the server reference, the tool names and the argument templates
    assert definition_hash(changed) != definition_hash(contract), what
