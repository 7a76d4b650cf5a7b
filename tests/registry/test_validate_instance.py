from __future__ import annotations

from registry.contracts import _compiled, validate_instance

SCHEMA = {
    "type": "object",
    "required": ["amount", "currency"],
    "additionalProperties": False,
    "properties": {
        "amount": {"type": "integer", "minimum": 1},
        "currency": {"type": "string"},
        "lines": {"type": "array", "items": {"type": "object", "properties": {"sku": {"type": "string"}}}},
        "odd key": {"type": "boolean"},
    },
}


def test_validate_instance_valid_returns_empty() -> None:
    assert validate_instance(SCHEMA, {"amount": 5, "currency": "EUR"}) == []


def test_validate_instance_messages_name_json_path() -> None:
    # given an instance with errors at several depths
    instance = {"amount": "x", "currency": "EUR", "lines": [{"sku": 3}], "odd key": 1}
    # when validated
    errors = validate_instance(SCHEMA, instance)
    # then each message names where it is, in a stable order
    assert errors == [
        "at $.amount: 'x' is not of type 'integer'",
        "at $.lines[0].sku: 3 is not of type 'string'",
        "at $[\"odd key\"]: 1 is not of type 'boolean'",
    ]


def test_validate_instance_root_errors() -> None:
    # given an instance missing a field and with an extra one
    errors = validate_instance(SCHEMA, {"amount": 1, "extra": True})
    # then root-level errors are reported at $
    assert errors == [
        "at $: 'currency' is a required property",
        "at $: Additional properties are not allowed ('extra' was unexpected)",
    ]


def test_validate_instance_caches_validator_by_content() -> None:
    # given two equal schemas that are different objects
    copy = {key: SCHEMA[key] for key in reversed(list(SCHEMA))}
    # when compiled
    # then the same compiled validator is reused
    assert _compiled(copy) is _compiled(SCHEMA)
