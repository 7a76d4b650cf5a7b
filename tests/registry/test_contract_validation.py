from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from registry.actions.builtin import BUILTIN_HANDLERS
from registry.contracts import registry_schema, validate_contract, validate_registry_document
from registry.errors import RegistryError

DOCS_SCHEMA = Path(__file__).resolve().parents[2] / "docs" / "action_registry.schema.json"


def _document_problems(document: dict[str, Any]) -> RegistryError:
    with pytest.raises(RegistryError) as caught:
        validate_registry_document(document)
    return caught.value


def test_example_registry_validates(example_document: dict[str, Any]) -> None:
    # given the shipped example file
    # when it is validated
    contracts = validate_registry_document(example_document)
    # then every contract is accepted
    assert [c["id"] for c in contracts] == [
        "noop",
        "charge_card",
        "update_inventory",
        "crm_create_contact",
    ]


def test_contract_bad_max_attempts_names_path(example_document: dict[str, Any]) -> None:
    # given a negative max_attempts in the third contract
    example_document["actions"][2]["execution_policy"]["forward"]["max_attempts"] = -1
    # when the document is validated
    error = _document_problems(example_document)
    # then the error names the exact path and the rule
    assert error.code == "INVALID_CONTRACT"
    assert "actions[2].execution_policy.forward.max_attempts: -1 is less than the minimum of 1" in error.message
    assert "nothing was registered" in error.message


def test_contract_missing_input_schema_names_contract(example_document: dict[str, Any]) -> None:
    # given a contract without input_schema
    del example_document["actions"][1]["input_schema"]
    # when validated
    error = _document_problems(example_document)
    # then
    assert "actions[1]: 'input_schema' is a required property" in error.problems


def test_contract_compensable_without_compensation_refused(builtin_contract: dict[str, Any]) -> None:
    # given a compensable action without compensation
    del builtin_contract["compensation"]
    # when validated
    with pytest.raises(RegistryError) as caught:
        validate_contract(builtin_contract)
    # then the message says why and what to do
    assert caught.value.code == "INVALID_CONTRACT"
    assert "contract: 'compensation' is required because semantic.reversibility is 'compensable'" in (
        caught.value.message
    )


def test_contract_read_only_with_compensation_refused(builtin_contract: dict[str, Any]) -> None:
    # given a read_only action that declares a compensation
    builtin_contract["semantic"]["reversibility"] = "read_only"
    # when validated
    with pytest.raises(RegistryError) as caught:
        validate_contract(builtin_contract, path="actions[4]")
    # then
    assert caught.value.problems[0].startswith("actions[4].compensation: not allowed")


def test_contract_result_template_in_forward_refused(http_contract: dict[str, Any]) -> None:
    # given a forward body that references the forward result
    http_contract["forward"]["body"]["previous"] = "${result.id}"
    # when validated
    with pytest.raises(RegistryError) as caught:
        validate_contract(http_contract)
    # then only compensation may use ${result...}
    assert caught.value.problems == [
        "contract.forward.body.previous: '${result.id}' refers to the forward result, which does not exist yet "
        "when the forward call is made; ${result...} is only allowed in compensation"
    ]


@pytest.mark.parametrize(
    ("template", "expected"),
    [
        ("${secrets.token}", "unknown root 'secrets'"),
        ("${saga.metadata}", "only ${saga.id} is available from saga"),
        ("order ${input.id}", "must be the whole string value"),
        ("${input.a b}", "path segments must be"),
    ],
)
def test_contract_bad_templates_refused(http_contract: dict[str, Any], template: str, expected: str) -> None:
    # given a body template that is not allowed
    http_contract["forward"]["body"]["x"] = [template]
    # when validated
    with pytest.raises(RegistryError) as caught:
        validate_contract(http_contract)
    # then the problem points into the body
    (problem,) = caught.value.problems
    assert problem.startswith("contract.forward.body.x[0]: ")
    assert expected in problem


def test_contract_templates_in_headers_refused(http_contract: dict[str, Any]) -> None:
    # given a template in a header (bodies and URLs are rendered, headers are not; see test_url_templates.py)
    http_contract["forward"]["headers"] = {"X-Order": "${input.id}"}
    # when validated
    with pytest.raises(RegistryError) as caught:
        validate_contract(http_contract)
    # then
    assert caught.value.problems[0].startswith(
        "contract.forward.headers.X-Order: templates are rendered in the body and the URL, not in headers"
    )


def test_contract_idempotency_key_header_refused(http_contract: dict[str, Any]) -> None:
    # given a contract that tries to set the idempotency header itself
    http_contract["forward"]["headers"] = {"idempotency-key": "fixed"}
    # when validated
    with pytest.raises(RegistryError) as caught:
        validate_contract(http_contract)
    # then
    assert "contract.forward.headers.idempotency-key: set by the coordinator" in caught.value.problems[0]


def test_contract_invalid_input_schema_names_schema_path(builtin_contract: dict[str, Any]) -> None:
    # given an input schema that is not a valid JSON Schema
    builtin_contract["input_schema"] = {"type": "object", "properties": {"n": {"type": "integr"}}}
    # when validated
    with pytest.raises(RegistryError) as caught:
        validate_contract(builtin_contract)
    # then the path goes into the schema
    (problem,) = caught.value.problems
    assert problem.startswith("contract.input_schema.properties.n.type: ")
    assert "not a valid JSON Schema draft 2020-12" in problem


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (lambda c: c["forward"].update(builtin="rm_rf"), "contract.forward.builtin: 'rm_rf' is not one of"),
        (lambda c: c.update(kind="grpc"), "contract.kind: 'grpc' is not one of ['http', 'builtin', 'mcp']"),
        (lambda c: c.update(execution_polcy={}), "'execution_polcy' was unexpected"),
        (lambda c: c.update(version="1.0"), "contract.version: '1.0' is not a semantic version"),
        (lambda c: c["semantic"].update(risk=5), "contract.semantic.risk: 5 is not of type 'string'"),
        (
            lambda c: c.update(execution_policy={"forward": {"jitter": 1.5}}),
            "contract.execution_policy.forward.jitter: 1.5 is greater than the maximum of 1",
        ),
    ],
)
def test_contract_shape_errors_name_path(builtin_contract: dict[str, Any], mutate: Any, expected: str) -> None:
    # given a contract with one shape error
    mutate(builtin_contract)
    # when validated
    with pytest.raises(RegistryError) as caught:
        validate_contract(builtin_contract)
    # then
    assert any(expected in problem for problem in caught.value.problems), caught.value.problems


def test_contract_secret_header_reference_validated(http_contract: dict[str, Any]) -> None:
    # given a secret header with an unsupported reference scheme
    http_contract["forward"]["headers"] = {"Authorization": {"secret_ref": "vault://payments", "prefix": "Bearer "}}
    # when validated
    with pytest.raises(RegistryError) as caught:
        validate_contract(http_contract)
    # then
    assert caught.value.problems == [
        "contract.forward.headers.Authorization.secret_ref: 'vault://payments' is not a secret reference "
        "env://NAME (an environment variable of the worker process)"
    ]


def test_registry_file_shape_errors_are_file_errors() -> None:
    # given a document with the wrong schema_version and no actions
    # when validated
    error = _document_problems({"schema_version": 2})
    # then
    assert error.code == "INVALID_REGISTRY_FILE"
    assert error.problems == ["(top level): 'actions' is a required property", "schema_version: 1 was expected"]


def test_registry_file_two_active_versions_refused(example_document: dict[str, Any]) -> None:
    # given a second active version of noop in the same file
    newer = dict(example_document["actions"][0], version="2.0.0")
    example_document["actions"].append(newer)
    # when validated
    error = _document_problems(example_document)
    # then the file is refused with a hint to deactivate one
    assert error.code == "INVALID_REGISTRY_FILE"
    assert "actions[4]: a second active version of 'noop' (the other is at actions[0])" in error.message


def test_published_schema_matches_package_copy() -> None:
    # given the schema in docs/ and the copy the code validates with
    # when compared
    published = json.loads(DOCS_SCHEMA.read_text(encoding="utf-8"))
    # then they are the same document
    assert published == registry_schema()


def test_schema_builtin_names_match_handler_table() -> None:
    # given the schema's list of builtin handler names
    names = registry_schema()["$defs"]["builtin_request"]["properties"]["builtin"]["enum"]
    # when compared with the handlers that exist
    # then every published name can run and every handler is published
    assert sorted(names) == sorted(BUILTIN_HANDLERS)


def test_seed_semantic_words_keep_our_compensation_rules(builtin_contract: dict[str, Any]) -> None:
    # semantic-saga-mcp's "full" is our reversible: it needs a compensation; an open semantic is accepted
    builtin_contract["semantic"] = {"reversibility": "full", "effects": {"creates": ["x"]}}
    builtin_contract.pop("compensation", None)
    with pytest.raises(RegistryError) as caught:
        validate_contract(builtin_contract)
    assert "'reversible' means the inverse is known" in caught.value.message
    builtin_contract.pop("semantic")
    validate_contract(builtin_contract)
