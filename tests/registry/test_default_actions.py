"""create_text_file@1.0.0 is there without a registry file (semantic-saga-mcp always had it); a file decides over it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from governance.identity.principal import Principal
from registry.defaults import default_contracts, register_defaults
from registry.models import ActionDefinition
from registry.services import action_register, registry_load_file
from sagas import coordinator
from sagas.errors import ActionFailedPermanent
from sagas.states import SagaStatus

pytestmark = pytest.mark.django_db(transaction=True)  # actions refuse to run inside a transaction
EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "action_registry.json"


def _contract() -> dict[str, object]:
    [contract] = default_contracts()
    return contract


def _write_registry(tmp_path: Path, contract: dict[str, object]) -> Path:
    path = tmp_path / "registry.json"
    path.write_text(json.dumps({"schema_version": 1, "actions": [contract]}))
    return path


def test_default_contract_is_registered_on_an_empty_registry():
    # when a server starts with no registry file
    added = register_defaults()
    # then create_text_file@1.0.0 is active, and a second start adds nothing
    assert added == ["create_text_file@1.0.0"]
    assert ActionDefinition.objects.get(action_id="create_text_file", active=True).version == "1.0.0"
    assert register_defaults() == []


def test_a_registry_file_that_deactivates_it_keeps_it_inactive(tmp_path: Path):
    # given a registry file that declares create_text_file@1.0.0 inactive
    registry_load_file(_write_registry(tmp_path, {**_contract(), "active": False}))
    # when the server starts again
    register_defaults()
    # then it stays inactive
    assert not ActionDefinition.objects.filter(action_id="create_text_file", active=True).exists()


def test_a_registry_file_that_replaces_it_keeps_its_version(tmp_path: Path):
    # given a registry file with another version of create_text_file
    registry_load_file(_write_registry(tmp_path, {**_contract(), "version": "2.0.0"}))
    # when the server starts
    register_defaults()
    # then the file's version is the one in force and 1.0.0 was never added
    assert list(ActionDefinition.objects.filter(action_id="create_text_file").values_list("version", flat=True)) == [
        "2.0.0"
    ]


def test_the_example_registry_leaves_the_default_to_the_server():
    # given a server that started without a file
    register_defaults()
    # when the example registry is loaded afterwards
    report = registry_load_file(EXAMPLES)
    # then it declares nothing about create_text_file (as the seed's example), so it cannot conflict with it
    assert not any(ref.startswith("create_text_file@") for ref in report.created + report.unchanged)
    assert ActionDefinition.objects.get(action_id="create_text_file").version == "1.0.0"


def test_a_database_with_the_earlier_contract_keeps_it_and_loads_todays_example():
    # given a database that loaded an earlier example registry: create_text_file@1.0.0 without simulate_error
    earlier = _contract()
    earlier["input_schema"] = {**earlier["input_schema"], "properties": _without_simulate_error(earlier)}  # type: ignore[dict-item]
    action_register(earlier)
    # when it is upgraded: today's example loaded (make run, SAGA_ACTIONS_FILE) and the server started
    registry_load_file(EXAMPLES)
    added = register_defaults()
    # then nothing conflicts and the pinned earlier contract stays in force
    assert added == []
    kept = ActionDefinition.objects.get(action_id="create_text_file")
    assert "simulate_error" not in kept.definition["input_schema"]["properties"]


def _without_simulate_error(contract: dict[str, object]) -> dict[str, object]:
    properties = dict(contract["input_schema"]["properties"])  # type: ignore[index]
    properties.pop("simulate_error")
    return properties


def test_simulate_error_fails_the_step_and_the_saga_rolls_back(operator: Principal, file_root: Path):
    # given the default contract and one file already created by the saga
    register_defaults()
    saga = coordinator.saga_begin(actor=operator)
    coordinator.saga_step_execute(
        actor=operator, saga_id=saga.id, action="create_text_file", input={"path": "demo-1.txt", "content": "one"}
    )
    # when a step asks for a simulated error
    with pytest.raises(ActionFailedPermanent) as failure:
        coordinator.saga_step_execute(
            actor=operator,
            saga_id=saga.id,
            action="create_text_file",
            input={"path": "demo-2.txt", "content": "never", "simulate_error": True},
        )
    # then the step failed with the seed's phrase, nothing was written, and the first file was compensated
    assert "simulated file transaction failure" in json.dumps(failure.value.extra)
    saga.refresh_from_db()
    assert saga.status == SagaStatus.ROLLED_BACK
    assert not (file_root / "demo-2.txt").exists()
    assert not (file_root / "demo-1.txt").exists()
