"""Values built by a JMESPath expression (registry.jmespath_values): a pack's `{"jmespath": ...}` is validated with
path-named errors, becomes the contract's `{"$jmespath": ...}` over its roots (args is input), renders like a
template (a null result is a missing path, not retried), and every reader of "what does this request read" sees
through it."""

from __future__ import annotations

from typing import Any

import pytest

from registry.compensation_plan import inverse_plan
from registry.contracts import compensation_needs_result, validate_contract
from registry.errors import ActionFailure, RegistryError
from registry.packs import PackError, parse_pack
from registry.templating import references_forward_answer, references_result_fields, render, roots_read

RENAMING = "result.results[*].{entityName: entityName, observations: addedObservations}"
ANSWER = {
    "results": [
        {"entityName": "Alice", "addedObservations": ["likes tea"]},
        {"entityName": "Bo", "addedObservations": []},
    ]
}
ADD_OBSERVATIONS = {
    "tool": "add_observations",
    "inverse": {"tool": "delete_observations", "args": {"deletions": {"jmespath": RENAMING}}},
}


def _pack(*entries: dict[str, Any]) -> dict[str, Any]:
    return {"name": "memory", "description": "memory", "entries": list(entries)}


def _compensation(entry: dict[str, Any]) -> dict[str, Any]:
    return dict(parse_pack(_pack(entry), "p.json").entries[0].as_mcp_contract_parts()["compensation"])


def _problems(entry: dict[str, Any]) -> list[str]:
    with pytest.raises(PackError) as refused:
        parse_pack(_pack(entry), "bad.json")
    return refused.value.problems


def test_a_renaming_per_item_becomes_the_contracts_expression_and_renders_the_exact_inverse() -> None:
    # given the pack entry for add_observations
    compensation = _compensation(ADD_OBSERVATIONS)
    # then the contract holds the same expression (it reads result only), and it renders delete_observations' shape
    assert compensation == {"tool": "delete_observations", "arguments": {"deletions": {"$jmespath": RENAMING}}}
    assert render(compensation["arguments"], {"input": {}, "result": ANSWER}) == {
        "deletions": [{"entityName": "Alice", "observations": ["likes tea"]}, {"entityName": "Bo", "observations": []}]
    }


def test_an_expression_reading_args_is_given_the_contracts_name_for_them() -> None:
    entry = {
        "tool": "tag",
        "inverse": {"tool": "untag", "args": {"pairs": {"jmespath": "args.tags[*].{id: name}"}, "id": "$.args.id"}},
    }
    arguments = _compensation(entry)["arguments"]
    assert arguments == {"pairs": {"$jmespath": "{args: input} | (args.tags[*].{id: name})"}, "id": "${input.id}"}
    assert render(arguments, {"input": {"id": 7, "tags": [{"name": "a"}, {"name": "b"}]}}) == {
        "pairs": [{"id": "a"}, {"id": "b"}],
        "id": 7,
    }


@pytest.mark.parametrize(
    ("entry", "expected"),
    [
        (
            {**ADD_OBSERVATIONS, "inverse": {"tool": "d", "args": {"deletions": {"jmespath": "result[*"}}}},
            "bad.json: entries[0].inverse.args.deletions: 'result[*' is not a JMESPath expression: Invalid jmespath "
            "expression: Incomplete expression",
        ),
        (
            {**ADD_OBSERVATIONS, "inverse": {"tool": "d", "args": {"x": {"jmespath": "result.a", "const": 1}}}},
            "bad.json: entries[0].inverse.args.x: {'jmespath': 'result.a', 'const': 1}: an object argument with "
            'an expression is exactly {"jmespath": "<expression>"}',
        ),
        (
            {**ADD_OBSERVATIONS, "inverse": {"tool": "d", "args": {"x": {"jmespath": "input.a"}}}},
            "bad.json: entries[0].inverse.args.x: 'input.a' reads 'input', which is not a root; start from one of "
            "args, result, pre_state",
        ),
        (
            {**ADD_OBSERVATIONS, "inverse": {"tool": "d", "args": {"x": {"jmespath": "@"}}}},
            "bad.json: entries[0].inverse.args.x: '@' reads the whole scope",
        ),
        (
            {**ADD_OBSERVATIONS, "inverse": {"tool": "d", "args": {"x": {"jmespath": "upper(result.a)"}}}},
            "bad.json: entries[0].inverse.args.x: 'upper(result.a)' calls upper(), which is not a JMESPath function",
        ),
        (
            {**ADD_OBSERVATIONS, "inverse": {"tool": "d", "args": {"x": {"jmespath": "pre_state.a"}}}},
            "bad.json: entries[0].inverse.args.x: reads $.pre_state but the entry declares no capture",
        ),
        (
            {**ADD_OBSERVATIONS, "inverse": {"tool": "d", "args": {"x": {"const": {"$jmespath": "result.a"}}}}},
            "bad.json: entries[0].inverse.args.x: {'const': {'$jmespath': 'result.a'}}: a constant holds no "
            "'$jmespath' object",
        ),
        (
            {**ADD_OBSERVATIONS, "capture": {"tool": "open_nodes", "args": {"names": {"jmespath": "result[*].a"}}}},
            "bad.json: entries[0].capture.args.names: 'result[*].a' reads result, which does not exist before the "
            "call runs; use args.x",
        ),
    ],
)
def test_a_bad_expression_is_refused_naming_its_path(entry: dict[str, Any], expected: str) -> None:
    problems = _problems(entry)
    assert any(problem.startswith(expected) for problem in problems), problems


def _mcp_contract(forward_arguments: Any, compensation_arguments: Any) -> dict[str, Any]:
    return {
        "id": "memory.add",
        "version": "1.0.0",
        "kind": "mcp",
        "description": "add observations",
        "semantic": {"domain": "memory", "operation": "add", "resource": "graph", "risk": "low"},
        "input_schema": {"type": "object"},
        "server": {"transport": "stdio", "command": "memory-server"},
        "forward": {"tool": "add_observations", "arguments": forward_arguments},
        "compensation": {"tool": "delete_observations", "arguments": compensation_arguments},
    }


def test_a_contracts_expression_may_read_the_result_only_in_compensation() -> None:
    validate_contract(_mcp_contract("${input}", {"deletions": {"$jmespath": RENAMING}}))
    with pytest.raises(RegistryError) as refused:
        validate_contract(
            _mcp_contract({"x": {"$jmespath": "result.a"}}, {"y": {"$jmespath": "pre_state.a"}}), "actions[0]"
        )
    assert refused.value.problems == [
        "actions[0].forward.arguments.x: 'result.a' reads the forward result, which does not exist yet when this call "
        "is made; result is only read in compensation",
        "actions[0].compensation.arguments.y: 'pre_state.a' reads the captured pre-state, which only exists for the "
        "compensation of an mcp action that declares a 'capture' tool call",
    ]


def test_a_contracts_expression_that_does_not_compile_is_refused_with_jmespaths_message() -> None:
    with pytest.raises(RegistryError) as refused:
        validate_contract(_mcp_contract("${input}", {"d": {"$jmespath": "result.[a"}}), "actions[0]")
    assert refused.value.problems == [
        "actions[0].compensation.arguments.d: 'result.[a' is not a JMESPath expression: Invalid jmespath expression: "
        "Incomplete expression"
    ]


def test_an_expression_yielding_null_fails_like_a_missing_template_path() -> None:
    # given an answer without the field the expression reads (a server answering a bare list, no structuredContent)
    with pytest.raises(ActionFailure) as failed:
        render({"deletions": {"$jmespath": RENAMING}}, {"result": [{"entityName": "Alice"}]}, "compensation.arguments")
    # then the call is not sent, and the message names the argument, the expression and what lacked it
    assert failed.value.code == "TEMPLATE_PATH_MISSING" and not failed.value.retryable
    message = failed.value.message
    assert message.startswith(f"compensation.arguments.deletions: the JMESPath expression {RENAMING!r}")
    assert "it yields null, so the forward call's answer did not have what it needs" in message


def test_an_empty_answer_is_an_empty_inverse_not_a_failure() -> None:
    assert render({"deletions": {"$jmespath": RENAMING}}, {"result": {"results": []}}) == {"deletions": []}


def test_the_readers_see_what_an_expression_reads() -> None:
    reads_result = {"tool": "d", "arguments": {"deletions": {"$jmespath": RENAMING}}}
    reads_pre_state = {"tool": "w", "arguments": {"content": {"$jmespath": "pre_state.content"}}}
    assert references_result_fields(reads_result) and references_forward_answer(reads_result)
    assert references_result_fields(reads_pre_state) and not references_forward_answer(reads_pre_state)
    assert roots_read(reads_result["arguments"]) == {"result"}
    assert compensation_needs_result(_mcp_contract("${input}", reads_result["arguments"]))
    assert not compensation_needs_result(_mcp_contract("${input}", {"names": {"$jmespath": "input.names"}}))


def test_an_inverse_plan_says_why_when_the_result_is_gone() -> None:
    compensation = {"tool": "delete_observations", "arguments": {"deletions": {"$jmespath": RENAMING}}}
    truncated = {"result": {"truncated": True, "prefix": "[{"}, "truncated": True}
    plan = inverse_plan(compensation, {"input": {}}, truncated)
    assert plan.arguments is None and "larger than the ledger keeps" in plan.problem
    kept = inverse_plan(compensation, {"input": {}}, {"result": ANSWER})
    assert kept.arguments == {"deletions": render({"d": {"$jmespath": RENAMING}}, {"result": ANSWER})["d"]}
