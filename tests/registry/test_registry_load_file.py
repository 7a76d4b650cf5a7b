from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from registry.errors import RegistryError
from registry.models import ActionDefinition
from registry.services import registry_load_file
from tests.registry.conftest import EXAMPLE_REGISTRY

pytestmark = pytest.mark.django_db


def _write(tmp_path: Path, document: Any) -> Path:
    path = tmp_path / "registry.json"
    path.write_text(json.dumps(document, indent=2), encoding="utf-8")
    return path


def test_registry_load_file_example_creates_all() -> None:
    # given the shipped example file and an empty registry
    # when loaded
    report = registry_load_file(EXAMPLE_REGISTRY)
    # then every contract is created and active
    assert report.created == [
        "noop@1.0.0",
        "charge_card@1.0.0",
        "update_inventory@1.0.0",
        "crm_create_contact@1.0.0",
    ]
    assert set(ActionDefinition.objects.filter(active=True).values_list("action_id", flat=True)) == {
        "noop",
        "charge_card",
        "update_inventory",
        "crm_create_contact",
    }
    assert report.summary() == (
        f"Loaded {EXAMPLE_REGISTRY}: 4 created (noop@1.0.0, charge_card@1.0.0, update_inventory@1.0.0, "
        "crm_create_contact@1.0.0), 0 unchanged, 0 activated."
    )


def test_registry_load_file_twice_is_idempotent() -> None:
    # given the example already loaded
    registry_load_file(EXAMPLE_REGISTRY)
    before = list(ActionDefinition.objects.order_by("pk").values())
    # when loaded again
    report = registry_load_file(EXAMPLE_REGISTRY)
    # then nothing changed
    assert (report.created, report.activated, len(report.unchanged)) == ([], [], 4)
    assert list(ActionDefinition.objects.order_by("pk").values()) == before


def test_registry_load_file_one_bad_contract_writes_nothing(tmp_path: Path, example_document: dict[str, Any]) -> None:
    # given a file whose last contract is invalid
    del example_document["actions"][2]["compensation"]
    path = _write(tmp_path, example_document)
    # when loaded
    with pytest.raises(RegistryError) as caught:
        registry_load_file(path)
    # then the error names the contract and no contract (not even the valid ones) was registered
    assert caught.value.code == "INVALID_CONTRACT"
    assert "actions[2]: 'compensation' is required" in caught.value.message
    assert not ActionDefinition.objects.exists()


def test_registry_load_file_conflict_writes_nothing(tmp_path: Path, example_document: dict[str, Any]) -> None:
    # given the example loaded, then a file that changes charge_card@1.0.0 and adds a new action
    registry_load_file(EXAMPLE_REGISTRY)
    example_document["actions"][1]["forward"]["timeout_seconds"] = 3
    example_document["actions"].insert(0, dict(example_document["actions"][0], id="noop2"))
    # when loaded
    with pytest.raises(RegistryError) as caught:
        registry_load_file(_write(tmp_path, example_document))
    # then the whole load is refused: noop2 was not created either
    assert caught.value.code == "ACTION_VERSION_CONFLICT"
    assert "charge_card@1.0.0" in caught.value.message
    assert not ActionDefinition.objects.filter(action_id="noop2").exists()


def test_registry_load_file_new_version_replaces_active(tmp_path: Path, example_document: dict[str, Any]) -> None:
    # given the example loaded
    registry_load_file(EXAMPLE_REGISTRY)
    # when a file with noop 1.1.0 (and 1.0.0 marked inactive) is loaded
    old = dict(example_document["actions"][0], active=False)
    new = dict(example_document["actions"][0], version="1.1.0")
    report = registry_load_file(_write(tmp_path, {"schema_version": 1, "actions": [old, new]}))
    # then 1.1.0 is the active noop
    assert (report.deactivated, report.created) == (["noop@1.0.0"], ["noop@1.1.0"])
    assert list(ActionDefinition.objects.filter(action_id="noop", active=True).values_list("version", flat=True)) == [
        "1.1.0"
    ]


def test_registry_load_file_missing_file_clear_error(tmp_path: Path) -> None:
    # given a path that does not exist
    # when loaded
    with pytest.raises(RegistryError) as caught:
        registry_load_file(tmp_path / "nope.json")
    # then
    assert caught.value.code == "INVALID_REGISTRY_FILE"
    assert "does not exist" in caught.value.message


def test_registry_load_file_bad_json_reports_line_and_column(tmp_path: Path) -> None:
    # given a file with a syntax error on line 3
    path = tmp_path / "broken.json"
    path.write_text('{\n  "schema_version": 1,\n  "actions": [,]\n}\n', encoding="utf-8")
    # when loaded
    with pytest.raises(RegistryError) as caught:
        registry_load_file(path)
    # then the position is named
    assert caught.value.code == "INVALID_REGISTRY_FILE"
    assert "is not valid JSON: Expecting value at line 3, column 15" in caught.value.message


def test_registry_load_file_duplicate_keys_refused(tmp_path: Path) -> None:
    # given an object with the same key twice (json would silently keep the last one)
    path = tmp_path / "dup.json"
    path.write_text('{"schema_version": 1, "actions": [], "actions": []}', encoding="utf-8")
    # when loaded
    with pytest.raises(RegistryError) as caught:
        registry_load_file(path)
    # then
    assert "the key 'actions' appears twice" in caught.value.message
