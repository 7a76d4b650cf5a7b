"""semantic-saga-mcp's older action-map format ({NAME: {"forward": request, "rollback": request}}) loads as the
contracts NAME@legacy-v1 the seed makes of it, with a warning saying how to convert it; a malformed entry is refused
naming the entry and the field; a file that is neither format keeps the versioned format's error (naming the
older format too when it has neither format's keys)."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest

from governance.identity.principal import Principal
from registry.checks import actions_file_check
from registry.contracts import definition_hash, resolved_execution_policy
from registry.errors import RegistryError
from registry.files import read_registry_file
from registry.models import ActionDefinition
from registry.selectors import action_get
from registry.services import registry_load_file
from sagas import coordinator
from sagas.errors import ActionFailedPermanent
from sagas.models import Step
from sagas.states import SagaStatus, StepStatus
from tests.httpserver import RecordingHTTPServer

SEED_ACTIONS = Path(__file__).resolve().parents[1] / "seed_parity" / "seed_files" / "actions.json"
SEED_HOST = "http://inventory.internal"


def _seed_map() -> dict[str, Any]:
    document: dict[str, Any] = json.loads(SEED_ACTIONS.read_text(encoding="utf-8"))
    return document


def _write(tmp_path: Path, document: Any, name: str = "actions.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(document), encoding="utf-8")
    return path


def _seed_map_against(tmp_path: Path, server: RecordingHTTPServer) -> Path:
    """The seed's file with only its host changed to the local server."""
    return _write(tmp_path, json.loads(SEED_ACTIONS.read_text(encoding="utf-8").replace(SEED_HOST, server.url)))


def _refusal(tmp_path: Path, document: Any) -> RegistryError:
    with pytest.raises(RegistryError) as caught:
        read_registry_file(_write(tmp_path, document))
    return caught.value


def _entry(**changes: Any) -> dict[str, Any]:
    entry = _seed_map()["reserve_inventory"]
    return {**entry, **changes}


# --- what an entry becomes --------------------------------------------------------------------------------------


def test_the_seed_action_map_is_the_contract_reserve_inventory_at_legacy_v1():
    # given the seed's examples/actions.json, as it ships
    seed = _seed_map()["reserve_inventory"]
    # when it is read
    (contract,) = read_registry_file(SEED_ACTIONS)
    # then it is the seed's contract: its id, version, semantics and schemas
    assert (contract["id"], contract["version"], contract["kind"]) == ("reserve_inventory", "legacy-v1", "http")
    assert contract["semantic"] == {
        "domain": "unspecified",
        "operation": "reserve_inventory",
        "reversibility": "configured",
        "risk": "unknown",
    }
    assert contract["input_schema"] == {"type": "object"} and "output_schema" not in contract
    # and its requests are the seed's forward and rollback, with the seed's 30 s timeout written out
    assert contract["forward"] == {**seed["forward"], "timeout_seconds": 30}
    assert contract["compensation"] == {**seed["rollback"], "timeout_seconds": 30}
    # and it retries as the seed retries a contract without a policy: one forward attempt, three compensations
    policy = resolved_execution_policy(contract)
    assert (policy["forward"]["max_attempts"], policy["compensation"]["max_attempts"]) == (1, 3)
    assert (policy["failure_mode"], policy["approval_required"]) == ("rollback", False)


def test_the_seeds_request_defaults_are_written_out(tmp_path: Path):
    # given requests leaning on the seed's defaults: no method, a lower-case one, a null body and null headers
    forward = {"url": "http://127.0.0.1:9/reservations", "body": None, "headers": None}
    rollback = {"url": "http://127.0.0.1:9/reservations/${result.id}", "method": "delete", "timeout_seconds": 5}
    # when the map is read
    (contract,) = read_registry_file(_write(tmp_path, {"reserve": {"forward": forward, "rollback": rollback}}))
    # then POST is written, the method upper-cased, null body and headers left out, a given timeout kept
    assert contract["forward"] == {"url": forward["url"], "method": "POST", "timeout_seconds": 30}
    assert contract["compensation"] == {"url": rollback["url"], "method": "DELETE", "timeout_seconds": 5}


def test_every_entry_becomes_its_own_contract(tmp_path: Path):
    request = {"url": "http://127.0.0.1:9/x", "method": "POST"}
    document = {name: {"forward": request, "rollback": request} for name in ("a", "b", "c")}
    contracts = read_registry_file(_write(tmp_path, document))
    assert [(c["id"], c["version"]) for c in contracts] == [("a", "legacy-v1"), ("b", "legacy-v1"), ("c", "legacy-v1")]


# --- the warning ------------------------------------------------------------------------------------------------


def test_loading_the_older_format_warns_once_naming_the_file_the_contracts_and_the_conversion(
    caplog: pytest.LogCaptureFixture, tmp_path: Path
):
    # when the seed's action map is read, twice (serve loads it, then the app it serves)
    path = tmp_path / "actions.json"
    path.write_bytes(SEED_ACTIONS.read_bytes())
    with caplog.at_level(logging.WARNING, logger="registry.files"):
        read_registry_file(path)
        read_registry_file(path)
    # then one warning names the file, the format, what each entry became and where the conversion is described
    (record,) = [r for r in caplog.records if r.name == "registry.files"]
    assert record.levelno == logging.WARNING
    message = record.getMessage()
    assert str(path) in message
    assert "older action-map format" in message
    assert "reserve_inventory@legacy-v1" in message and "NAME@legacy-v1" in message
    assert "versioned registry format" in message and "docs/action_registry.md" in message


def test_a_versioned_file_gives_no_warning(tmp_path: Path, caplog: pytest.LogCaptureFixture):
    document = {"schema_version": 1, "actions": read_registry_file(SEED_ACTIONS)}
    document["actions"][0]["version"] = "1.0.0"
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="registry.files"):
        read_registry_file(_write(tmp_path, document))
    assert [r for r in caplog.records if r.name == "registry.files"] == []


def test_the_warning_names_entry_keys_ignored_as_the_seed_ignores_them(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
):
    path = _write(tmp_path, {"reserve_inventory": _entry(description="reserve stock")})
    with caplog.at_level(logging.WARNING, logger="registry.files"):
        (contract,) = read_registry_file(path)
    assert "description" not in contract
    assert "Ignored, as semantic-saga-mcp ignores them: reserve_inventory.description" in caplog.text


def test_the_start_up_check_warns_and_does_not_refuse(settings: Any):
    # given SAGA_ACTIONS_FILE naming the seed's action map (as `--actions` names it)
    settings.SAGA_ACTIONS_FILE = str(SEED_ACTIONS)
    # when the start-up check runs
    (message,) = actions_file_check()
    # then it is a warning (the serving commands start), saga.W030, naming the file and the conversion
    assert message.id == "saga.W030" and not message.is_serious()
    assert message.msg.startswith(f"SAGA_ACTIONS_FILE: {SEED_ACTIONS} is in semantic-saga-mcp's older action-map")
    assert "reserve_inventory@legacy-v1" in message.msg and "docs/action_registry.md" in (message.hint or "")


# --- malformed entries ------------------------------------------------------------------------------------------

FORWARD = {"url": "http://127.0.0.1:9/reservations", "method": "POST"}
ROLLBACK = {"url": "http://127.0.0.1:9/reservations/cancel", "method": "POST"}


@pytest.mark.parametrize(
    ("entry", "expected"),
    [
        ({"forward": FORWARD}, "reserve.rollback: missing; every entry needs both requests"),
        ({"rollback": ROLLBACK}, "reserve.forward: missing; every entry needs both requests"),
        (
            {"forward": FORWARD, "compensation": ROLLBACK},
            "reserve.rollback: missing (this format calls it rollback, not compensation)",
        ),
        ("POST http://127.0.0.1:9/x", "reserve: is a string, but an entry must be an object"),
        ({"forward": FORWARD, "rollback": [ROLLBACK]}, "reserve.rollback: is an array, but must be an HTTP request"),
        (
            {"forward": {**FORWARD, "url": 42}, "rollback": ROLLBACK},
            "reserve.forward.url: is a number, but must be a string: the absolute http:// or https:// URL",
        ),
        ({"forward": {"method": "POST"}, "rollback": ROLLBACK}, "reserve.forward.url: missing; give the absolute"),
        (
            {"forward": FORWARD, "rollback": {**ROLLBACK, "verb": "POST"}},
            "reserve.rollback.verb: not a field of an HTTP request (those are url, method, body, headers, "
            "timeout_seconds); remove or rename it",
        ),
        (
            {"forward": {**FORWARD, "method": ["POST"]}, "rollback": ROLLBACK},
            "reserve.forward.method: is an array, but must be a string",
        ),
    ],
)
def test_a_malformed_entry_is_refused_naming_the_entry_and_the_field(tmp_path: Path, entry: Any, expected: str):
    # (beside a good entry: a map none of whose values is an object is no action map)
    refusal = _refusal(tmp_path, {"reserve": entry, "other": {"forward": FORWARD, "rollback": ROLLBACK}})
    assert refusal.code == "INVALID_REGISTRY_FILE"
    assert expected in refusal.message
    assert refusal.message.startswith("The file is in semantic-saga-mcp's older action-map format")
    assert "nothing was registered" in refusal.message and "docs/action_registry.md" in refusal.message


@pytest.mark.parametrize(
    ("entry", "expected"),
    [
        (
            {"forward": FORWARD, "rollback": {**ROLLBACK, "url": "ftp://127.0.0.1/cancel"}},
            "reserve.rollback.url: 'ftp://127.0.0.1/cancel' is not an absolute http:// or https:// URL",
        ),
        ({"forward": {**FORWARD, "method": "head"}, "rollback": ROLLBACK}, "reserve.forward.method: 'HEAD' is not"),
        (
            {"forward": {**FORWARD, "headers": {"X-Tenant": "${input.tenant}"}}, "rollback": ROLLBACK},
            "reserve.forward.headers.X-Tenant: templates are rendered in the body and the URL, not in headers",
        ),
        (
            {"forward": FORWARD, "rollback": {**ROLLBACK, "body": {"note": "undo ${result.id}"}}},
            "reserve.rollback.body.note: 'undo ${result.id}' mixes a template with other text",
        ),
        (
            {"forward": {**FORWARD, "timeout_seconds": 900}, "rollback": ROLLBACK},
            "reserve.forward.timeout_seconds: 900 is greater than the maximum of 300",
        ),
    ],
)
def test_what_our_http_requests_refuse_is_refused_with_the_entrys_path(tmp_path: Path, entry: Any, expected: str):
    # the translated contract is validated like any other; the problem is named where the file has it
    refusal = _refusal(tmp_path, {"reserve": entry})
    assert refusal.code == "INVALID_CONTRACT"
    assert expected in refusal.message
    assert "actions[" not in refusal.message and "0.0.0" not in refusal.message
    assert refusal.message.startswith("The file is in semantic-saga-mcp's older action-map format")


def test_an_entry_name_that_is_no_action_id_is_refused(tmp_path: Path):
    refusal = _refusal(tmp_path, {"reserve inventory": {"forward": FORWARD, "rollback": ROLLBACK}})
    assert "'reserve inventory': the entry name is the action id" in refusal.message
    assert "rename the entry" in refusal.message


def test_every_problem_of_every_entry_is_listed(tmp_path: Path):
    refusal = _refusal(tmp_path, {"a": {"forward": FORWARD}, "b": "x", "c": {"forward": FORWARD, "rollback": ROLLBACK}})
    assert refusal.problems == [
        'a.rollback: missing; every entry needs both requests {"forward": {"url": ..., "method": ...}, '
        '"rollback": {"url": ..., "method": ...}}',
        'b: is a string, but an entry must be an object {"forward": {"url": ..., "method": ...}, '
        '"rollback": {"url": ..., "method": ...}}',
    ]


@pytest.mark.parametrize(
    ("document", "names_the_older_format"),
    [
        # an object with neither format's keys may have been meant as the older map: the error shows both formats
        ({}, True),
        ({"foo": 1}, True),
        ({"reserve": "POST /x"}, True),
        # a versioned file gone wrong, or not an object at all: the versioned format's error alone
        ({"schema_version": 1}, False),
        ({"actions": {}}, False),
        (["reserve"], False),
    ],
)
def test_a_file_that_is_neither_format_keeps_the_versioned_formats_error(
    tmp_path: Path, document: Any, names_the_older_format: bool
):
    refusal = _refusal(tmp_path, document)
    assert refusal.code == "INVALID_REGISTRY_FILE"
    assert refusal.message.startswith("The registry file is not valid:")
    assert 'A registry file is {"schema_version": 1, "actions": [...]}' in refusal.message
    assert ("older action-map format" in refusal.message) is names_the_older_format


def test_the_start_up_check_refuses_a_malformed_action_map_with_e030(settings: Any, tmp_path: Path):
    settings.SAGA_ACTIONS_FILE = str(_write(tmp_path, {"reserve": {"forward": FORWARD}}))
    (message,) = actions_file_check()
    assert message.id == "saga.E030" and message.is_serious()
    assert "reserve.rollback: missing" in message.msg


@pytest.mark.django_db
def test_a_malformed_entry_registers_nothing(tmp_path: Path):
    path = _write(tmp_path, {"good": {"forward": FORWARD, "rollback": ROLLBACK}, "bad": {"forward": FORWARD}})
    with pytest.raises(RegistryError):
        registry_load_file(path)
    assert not ActionDefinition.objects.filter(action_id__in=["good", "bad"]).exists()


# --- registered and run -----------------------------------------------------------------------------------------


@pytest.mark.django_db
def test_loading_registers_the_legacy_v1_contract_once():
    # when the seed's file is loaded twice
    first = registry_load_file(SEED_ACTIONS)
    second = registry_load_file(SEED_ACTIONS)
    # then one active row reserve_inventory@legacy-v1, hashed as read, unchanged by the second load
    row = action_get("reserve_inventory")
    (contract,) = read_registry_file(SEED_ACTIONS)
    assert (row.version, row.active, row.definition_hash) == ("legacy-v1", True, definition_hash(contract))
    assert (first.created, second.unchanged) == (["reserve_inventory@legacy-v1"], ["reserve_inventory@legacy-v1"])
    assert ActionDefinition.objects.filter(action_id="reserve_inventory").count() == 1


@pytest.mark.django_db
def test_an_entry_edited_after_it_was_loaded_becomes_the_next_legacy_version(tmp_path: Path):
    # given the seed's action map loaded once, then one of its URLs edited (the format has no version to raise)
    original = json.loads(SEED_ACTIONS.read_text())
    path = tmp_path / "actions.json"
    path.write_text(json.dumps(original))
    registry_load_file(path)
    edited = json.loads(json.dumps(original))
    edited["reserve_inventory"]["forward"]["url"] = "http://inventory.internal/v2/reservations"
    path.write_text(json.dumps(edited))
    # when it is loaded again
    report = registry_load_file(path)
    # then the edit is reserve_inventory@legacy-v2, active; legacy-v1 stays registered for the steps that pin it
    assert report.created == ["reserve_inventory@legacy-v2"]
    versions = dict(ActionDefinition.objects.filter(action_id="reserve_inventory").values_list("version", "active"))
    assert versions == {"legacy-v1": False, "legacy-v2": True}
    assert action_get("reserve_inventory").definition["forward"]["url"].endswith("/v2/reservations")
    # and going back to the original content is legacy-v1 again, not a third version
    path.write_text(json.dumps(original))
    registry_load_file(path)
    versions = dict(ActionDefinition.objects.filter(action_id="reserve_inventory").values_list("version", "active"))
    assert versions == {"legacy-v1": True, "legacy-v2": False}


@pytest.mark.django_db(transaction=True)
def test_a_step_reserves_and_its_compensation_cancels_with_the_results_reservation_id(
    operator: Principal, server: RecordingHTTPServer, tmp_path: Path
):
    # given the seed's action map pointed at a local inventory service that reserves as res_42
    registry_load_file(_seed_map_against(tmp_path, server))
    server.script("/reservations", [(201, {"reservation_id": "res_42"})])
    saga = coordinator.saga_begin(actor=operator)
    # when a step reserves, then the saga rolls back
    step = coordinator.saga_step_execute(
        actor=operator, saga_id=saga.id, action="reserve_inventory", input={"sku": "SKU-1", "quantity": 2}
    )
    rolled_back = coordinator.saga_rollback(actor=operator, saga_id=saga.id)
    # then the forward request was the seed's, with the step's input in its body
    reserve, cancel = server.requests
    assert (reserve.method, reserve.path, reserve.json) == ("POST", "/reservations", {"sku": "SKU-1", "quantity": 2})
    assert reserve.headers["Idempotency-Key"] == str(step.id)
    # and the compensation sent the rollback request with the result's reservation_id
    assert (cancel.method, cancel.path, cancel.json) == ("POST", "/reservations/cancel", {"reservation_id": "res_42"})
    assert cancel.headers["Idempotency-Key"] == f"{step.id}:rollback"
    assert rolled_back.status == SagaStatus.ROLLED_BACK
    step.refresh_from_db()
    assert (step.status, step.action_version) == (StepStatus.COMPENSATED, "legacy-v1")


@pytest.mark.django_db(transaction=True)
def test_a_failed_reservation_is_tried_once_as_the_seed_tries_it(
    operator: Principal, server: RecordingHTTPServer, tmp_path: Path
):
    # given the inventory service failing with a retryable 503
    registry_load_file(_seed_map_against(tmp_path, server))
    server.script("/reservations", [(503, {"error": "busy"}), (201, {"reservation_id": "res_1"})])
    saga = coordinator.saga_begin(actor=operator)
    # when a step reserves
    with pytest.raises(ActionFailedPermanent) as failure:
        coordinator.saga_step_execute(
            actor=operator, saga_id=saga.id, action="reserve_inventory", input={"sku": "SKU-1", "quantity": 1}
        )
    # then one attempt only (the seed's default), and the saga rolled back with nothing to cancel
    assert [r.path for r in server.requests] == ["/reservations"]
    assert failure.value.extra["saga_status"] == SagaStatus.ROLLED_BACK
    assert Step.objects.get(saga=saga).attempts == 1
