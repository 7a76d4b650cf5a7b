"""Hostile registry and policy files (issue 20, item 3): the examples mutated at a random place (a value replaced by
arbitrary JSON, a huge string or deep nesting, a key dropped), arbitrary JSON documents, deep nesting, bytes that are
not UTF-8. registry_load_file (what `semantic-saga load_actions` and SAGA_ACTIONS_FILE run) either loads the file or
raises RegistryError and registers nothing; JsonPolicy.load either loads it or raises PolicyFileError."""

from __future__ import annotations

import copy
import json
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from governance.policy.facts import PolicyFileError
from governance.policy.json_rules import JsonPolicy
from registry.errors import RegistryError
from registry.models import ActionDefinition
from registry.services import registry_load_file
from tests.fuzz.hostile import FUZZ, deep_values, huge_strings, json_values

ROOT = Path(__file__).resolve().parents[2]
REGISTRY = json.loads((ROOT / "examples" / "action_registry.json").read_text())
POLICY = json.loads((ROOT / "examples" / "governance_policy.json").read_text())


def _paths(document: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [prefix]
    if isinstance(document, dict):
        for key, value in document.items():
            found += _paths(value, (*prefix, key))
    elif isinstance(document, list):
        for index, value in enumerate(document):
            found += _paths(value, (*prefix, index))
    return found


def mutated(example: Any) -> st.SearchStrategy[Any]:
    def apply(path: tuple[Any, ...], value: Any, drop: bool) -> Any:
        document = copy.deepcopy(example)
        if not path:
            return value
        parent = document
        for part in path[:-1]:
            parent = parent[part]
        if drop and isinstance(parent, dict):
            del parent[path[-1]]
        else:
            parent[path[-1]] = value
        return document

    values = st.one_of(json_values, huge_strings, deep_values)
    return st.builds(apply, st.sampled_from(_paths(example)), values, st.booleans())


def _file_bytes(document: Any) -> st.SearchStrategy[bytes]:
    return st.one_of(
        mutated(document).map(lambda d: json.dumps(d).encode()),
        json_values.map(lambda d: json.dumps(d).encode()),
        st.just(b'{"a":' * 5000 + b"1" + b"}" * 5000),
        st.binary(max_size=200),
    )


def _write(content: bytes, suffix: str) -> Path:
    with tempfile.NamedTemporaryFile("wb", suffix=suffix, delete=False) as file:
        file.write(content)
    return Path(file.name)


@pytest.mark.django_db(transaction=True)
@FUZZ
@given(content=_file_bytes(REGISTRY))
def test_a_hostile_registry_file_is_refused_whole_with_a_registry_error(content: bytes) -> None:
    path = _write(content, ".json")
    before = ActionDefinition.objects.count()
    try:
        registry_load_file(path)
    except RegistryError as refused:
        assert str(refused).strip(), "a RegistryError without a message"
        assert ActionDefinition.objects.count() == before, "a refused file registered actions"
    finally:
        path.unlink()


@FUZZ
@given(content=_file_bytes(POLICY))
def test_a_hostile_policy_file_is_refused_with_a_policy_file_error(content: bytes) -> None:
    path = _write(content, ".json")
    try:
        JsonPolicy.load(path)
    except PolicyFileError as refused:
        assert refused.message.strip(), "a PolicyFileError without a message"
    finally:
        path.unlink()
