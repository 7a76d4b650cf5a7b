"""The replaced product's registry shape, end to end: a service created by `POST .../services` and compensated by
`DELETE .../services/${result.id}` loads from a file, runs against a real local HTTP service and rolls back with
the id in the path and `Idempotency-Key: <step id>:rollback`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from governance.identity.principal import Principal
from registry.contracts import definition_hash
from registry.services import registry_load_file
from sagas import coordinator
from sagas.models import Step
from sagas.states import SagaStatus, StepStatus
from tests.contracts import FAST_RETRY
from tests.httpserver import RecordingHTTPServer


def _service_contract(base_url: str) -> dict[str, Any]:
    return {
        "id": "create_service",
        "version": "1.0.0",
        "kind": "http",
        "semantic": {
            "domain": "platform",
            "operation": "create",
            "resource": "service",
            "risk": "medium",
            "reversibility": "compensable",
        },
        "input_schema": {
            "type": "object",
            "required": ["name"],
            "properties": {"name": {"type": "string"}},
        },
        "output_schema": {"type": "object", "required": ["id"], "properties": {"id": {"type": "string"}}},
        "execution_policy": {"forward": FAST_RETRY, "compensation": {"max_attempts": 2, **FAST_RETRY}},
        "forward": {"url": f"{base_url}/services", "method": "POST", "body": {"name": "${input.name}"}},
        "compensation": {"url": f"{base_url}/services/${{result.id}}", "method": "DELETE"},
    }


def _load(tmp_path: Path, downstream: RecordingHTTPServer) -> dict[str, Any]:
    contract = _service_contract(downstream.url)
    path = tmp_path / "action_registry.json"
    path.write_text(json.dumps({"schema_version": 1, "actions": [contract]}), encoding="utf-8")
    registry_load_file(path)
    return contract


def _create(operator: Principal, name: str) -> tuple[Any, Step]:
    saga = coordinator.saga_begin(actor=operator)
    step = coordinator.saga_step_execute(actor=operator, saga_id=saga.id, action="create_service", input={"name": name})
    return saga, step


def test_service_created_by_post_is_deleted_by_id_on_rollback(
    operator: Principal, downstream: RecordingHTTPServer, tmp_path: Path
) -> None:
    # given the seed's registry shape loaded from a file, and a service the remote creates as svc_42
    _load(tmp_path, downstream)
    downstream.script("/services", [(201, {"id": "svc_42"})])
    saga, step = _create(operator, "billing")
    # when the saga rolls back
    rolled_back = coordinator.saga_rollback(actor=operator, saga_id=saga.id)
    # then the created service was deleted by its id in the path, keyed for deduplication
    assert rolled_back.status == SagaStatus.ROLLED_BACK
    (create, delete) = downstream.requests
    assert (create.method, create.path, create.json) == ("POST", "/services", {"name": "billing"})
    assert (delete.method, delete.path) == ("DELETE", "/services/svc_42")
    assert delete.headers["Idempotency-Key"] == f"{step.id}:rollback"
    step.refresh_from_db()
    assert step.status == StepStatus.COMPENSATED


def test_hostile_id_from_the_remote_stays_in_its_segment(
    operator: Principal, downstream: RecordingHTTPServer, tmp_path: Path
) -> None:
    # given a remote answering an id that tries to climb out of /services
    _load(tmp_path, downstream)
    downstream.script("/services", [(201, {"id": "../admin?all=1#x"})])
    saga, _ = _create(operator, "billing")
    # when the saga rolls back
    coordinator.saga_rollback(actor=operator, saga_id=saga.id)
    # then the delete addressed exactly that one (odd) id below /services
    assert [(r.method, r.path) for r in downstream.requests[1:]] == [("DELETE", "/services/..%2Fadmin%3Fall%3D1%23x")]


def test_refused_compensation_journals_the_rendered_url(
    operator: Principal, downstream: RecordingHTTPServer, tmp_path: Path
) -> None:
    # given a created service whose deletion the remote refuses
    _load(tmp_path, downstream)
    downstream.script("/services", [(201, {"id": "svc_7"})])
    downstream.script("/services/svc_7", [(409, {"error": "still in use"})])
    saga, step = _create(operator, "billing")
    # when the saga rolls back
    rolled_back = coordinator.saga_rollback(actor=operator, saga_id=saga.id)
    # then the step's journaled error names the request target as sent, not the template
    assert rolled_back.status == SagaStatus.ROLLBACK_FAILED
    step.refresh_from_db()
    assert step.compensation_error is not None
    assert step.compensation_error["message"].startswith(f"DELETE {downstream.url}/services/svc_7 answered 409")


def test_definition_hash_covers_the_template_not_the_values(
    operator: Principal, downstream: RecordingHTTPServer, tmp_path: Path
) -> None:
    # given one contract and two sagas with different inputs and different created ids
    contract = _load(tmp_path, downstream)
    downstream.script("/services", [(201, {"id": "svc_1"}), (201, {"id": "svc_2"})])
    _, first = _create(operator, "billing")
    _, second = _create(operator, "search")
    # then both steps pin the same hash, that of the contract as written, with the template kept verbatim
    assert first.action_definition_hash == second.action_definition_hash == definition_hash(contract)
    assert second.action_definition["compensation"]["url"] == f"{downstream.url}/services/${{result.id}}"
