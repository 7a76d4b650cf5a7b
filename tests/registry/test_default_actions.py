"""create_text_file is there without a registry file (semantic-saga-mcp always had it); a file decides over it, and
a changed default is a new version that replaces the previous default once (registry.defaults)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from governance.identity.principal import Principal
from registry.defaults import default_contracts, register_defaults
from registry.models import ActionDefinition
from registry.services import action_register, registry_load_file
from sagas import coordinator
from sagas.errors import ActionFailedPermanent
from sagas.selectors.sagas import unfinished_work_pins
from sagas.states import SagaStatus
from tests.seed_parity.test_seed_answer_fields import PREVIOUS_CREATE_TEXT_FILE

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
    # then semantic-saga-mcp's create_text_file@1.0.0 is active, and a second start adds nothing
    assert added == ["create_text_file@1.0.0"]
    row = ActionDefinition.objects.get(action_id="create_text_file", active=True)
    assert (row.version, row.definition["semantic"]["resource"]) == ("1.0.0", "text_file")
    assert register_defaults() == []


def test_a_registry_file_that_deactivates_it_keeps_it_inactive(tmp_path: Path):
    # given a registry file that declares create_text_file (today's version) inactive
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
    # then the file's version is the one in force and the default was never added
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
    earlier = {**_contract(), "version": "1.0.0"}
    earlier["input_schema"] = {**earlier["input_schema"], "properties": _without_simulate_error(earlier)}  # type: ignore[dict-item]
    action_register(earlier)
    # when it is upgraded: today's example loaded (make run, SAGA_ACTIONS_FILE) and the server started
    registry_load_file(EXAMPLES)
    added = register_defaults()
    # then nothing conflicts and the pinned earlier contract stays in force
    assert added == []
    kept = ActionDefinition.objects.get(action_id="create_text_file")
    assert "simulate_error" not in kept.definition["input_schema"]["properties"]


def test_the_previous_default_is_replaced_once_and_an_operators_later_choice_stands():
    # given a database where the previous default, create_text_file@1.0.0, is active
    action_register(PREVIOUS_CREATE_TEXT_FILE)
    # when the server starts: today's version is added and active, the previous one stays registered
    assert register_defaults() == ["create_text_file@1.1.0"]
    assert _versions() == {"1.0.0": False, "1.1.0": True}
    # and when an operator activates 1.0.0 again, later starts leave that choice alone
    action_register(PREVIOUS_CREATE_TEXT_FILE)
    assert register_defaults() == []
    assert _versions() == {"1.0.0": True, "1.1.0": False}


def test_the_upgrade_waits_while_unfinished_work_pins_the_previous_default(operator: Principal, file_root: Path):
    # given the previous default active and a saga with a node planned under it, not yet run
    action_register(PREVIOUS_CREATE_TEXT_FILE)
    saga = coordinator.saga_begin(actor=operator)
    node = coordinator.node_plan(
        actor=operator, saga_id=saga.id, action="create_text_file", input={"path": "later.txt", "content": "x"}
    )
    # when the server starts (serve passes this check): nothing is replaced while that node may still run
    assert register_defaults(postpone=unfinished_work_pins) == []
    assert _versions() == {"1.0.0": True}
    # then the node runs under the contract it was planned with, and once the saga is done the upgrade happens
    coordinator.saga_run_ready(actor=operator, saga_id=saga.id, wait_seconds=5)
    assert coordinator.saga_commit(actor=operator, saga_id=saga.id).status == SagaStatus.COMMITTED
    assert node.action_version == "1.0.0"
    assert register_defaults(postpone=unfinished_work_pins) == ["create_text_file@1.1.0"]
    assert _versions() == {"1.0.0": False, "1.1.0": True}


def test_the_previous_default_stays_when_the_registry_file_names_it(tmp_path: Path, settings: Any):
    # given SAGA_ACTIONS_FILE declaring the previous default, loaded at start
    settings.SAGA_ACTIONS_FILE = str(_write_registry(tmp_path, PREVIOUS_CREATE_TEXT_FILE))
    registry_load_file(settings.SAGA_ACTIONS_FILE)
    # when the defaults are registered after it
    assert register_defaults() == []
    # then the file decides: its version stays the only one (a later start cannot flip it back and forth)
    assert _versions() == {"1.0.0": True}


def _versions() -> dict[str, bool]:
    return dict(ActionDefinition.objects.filter(action_id="create_text_file").values_list("version", "active"))


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
