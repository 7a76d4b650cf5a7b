from __future__ import annotations

import pytest

from governance.identity.principal import Principal
from registry.errors import RegistryError
from registry.models import ActionDefinition
from sagas import coordinator
from sagas.models import Step
from sagas.states import SagaStatus, StepStatus
from tests.contracts import http_contract, register
from tests.httpserver import RecordingHTTPServer
from tests.sagas.helpers import calls


def test_v1_step_is_compensated_with_v1_request_after_registry_moves_to_v2(
    operator: Principal, downstream: RecordingHTTPServer
):
    # given a step run with v1, then v2 becomes the active version with another compensation endpoint
    register(http_contract("charge", downstream.url, version="1.0.0", compensation_path="/v1/refund"))
    saga = coordinator.saga_begin(actor=operator)
    step = coordinator.saga_step_execute(actor=operator, saga_id=saga.id, action="charge", input={})
    register(http_contract("charge", downstream.url, version="2.0.0", compensation_path="/v2/refund"))
    assert ActionDefinition.objects.get(action_id="charge", active=True).version == "2.0.0"
    # when
    coordinator.saga_rollback(actor=operator, saga_id=saga.id)
    # then v1's compensation ran, not v2's
    assert len(calls(downstream, "/v1/refund")) == 1
    assert calls(downstream, "/v2/refund") == []
    step.refresh_from_db()
    assert step.action_version == "1.0.0" and step.status == StepStatus.COMPENSATED


def test_tampered_snapshot_is_refused_as_compensation_failed(operator: Principal, downstream: RecordingHTTPServer):
    # given a completed step whose stored snapshot is edited behind the coordinator's back
    register(http_contract("charge", downstream.url))
    saga = coordinator.saga_begin(actor=operator)
    step = coordinator.saga_step_execute(actor=operator, saga_id=saga.id, action="charge", input={})
    snapshot = dict(step.action_definition)
    snapshot["compensation"] = {**snapshot["compensation"], "url": "http://127.0.0.1:9/attacker"}
    Step.objects.filter(pk=step.pk).update(action_definition=snapshot)
    # when
    saga = coordinator.saga_rollback(actor=operator, saga_id=saga.id)
    # then nothing was called and the failure is visible
    step.refresh_from_db()
    assert step.status == StepStatus.COMPENSATION_FAILED
    assert step.compensation_error["code"] == "DEFINITION_HASH_MISMATCH"
    assert saga.status == SagaStatus.ROLLBACK_FAILED
    assert [r for r in downstream.requests if "undo" in r[1]] == []


def test_contracts_are_immutable(downstream: RecordingHTTPServer):
    # given a registered version
    register(http_contract("charge", downstream.url, version="1.0.0"))
    # when the same id and version is registered with different content
    changed = http_contract("charge", downstream.url, version="1.0.0", max_attempts=9)
    with pytest.raises(RegistryError) as refused:
        register(changed)
    # then it is refused and the stored row is unchanged
    assert refused.value.code == "ACTION_VERSION_CONFLICT"
    row = ActionDefinition.objects.get(action_id="charge", version="1.0.0")
    assert row.definition["execution_policy"]["forward"]["max_attempts"] == 3
