"""A node's pinned contract is read by the query that finds it ready and verified once per process per stored
text: a registry row edited in place, or retired, after this process has run the contract is still refused."""

from __future__ import annotations

from governance.identity.principal import Principal
from registry.models import ActionDefinition
from sagas import coordinator
from sagas.models import Node
from sagas.states import NodeStatus
from tests.contracts import http_contract, register
from tests.httpserver import RecordingHTTPServer
from tests.sagas.helpers import calls


def _run_one(operator: Principal) -> Node:
    saga = coordinator.saga_begin(actor=operator)
    node = coordinator.node_plan(actor=operator, saga_id=saga.id, action="charge", input={})
    coordinator.saga_run_ready(actor=operator, saga_id=saga.id)
    node.refresh_from_db()
    return node


def test_a_contract_edited_in_place_after_a_run_is_refused(operator: Principal, downstream: RecordingHTTPServer):
    # given a contract this process has already verified and run
    register(http_contract("charge", downstream.url))
    assert _run_one(operator).status == NodeStatus.COMPLETED
    # when its stored definition is edited behind the registry's back (the hash column left as it was)
    row = ActionDefinition.objects.get(action_id="charge")
    tampered = {**row.definition, "forward": {**row.definition["forward"], "url": "http://127.0.0.1:9/attacker"}}
    ActionDefinition.objects.filter(pk=row.pk).update(definition=tampered)
    node = _run_one(operator)
    # then the next node pinned to that hash is refused before anything is called
    assert node.status == NodeStatus.FAILED
    assert node.error["code"] == "DEFINITION_HASH_MISMATCH"
    assert len(calls(downstream, "/charge")) == 1


def test_a_contract_retired_after_a_run_is_refused(operator: Principal, downstream: RecordingHTTPServer):
    # given a contract this process has already verified and run
    register(http_contract("charge", downstream.url))
    assert _run_one(operator).status == NodeStatus.COMPLETED
    saga = coordinator.saga_begin(actor=operator)
    node = coordinator.node_plan(actor=operator, saga_id=saga.id, action="charge", input={})
    # when the version is retired after the node was planned
    ActionDefinition.objects.filter(action_id="charge").update(active=False)
    coordinator.saga_run_ready(actor=operator, saga_id=saga.id)
    # then the node does not run, and says why
    node.refresh_from_db()
    assert node.status == NodeStatus.FAILED
    assert node.error["code"] == "ACTION_INACTIVE"
    assert len(calls(downstream, "/charge")) == 1


def test_the_same_contract_runs_again_from_the_verified_copy(operator: Principal, downstream: RecordingHTTPServer):
    # given a contract run once; when nodes pinned to it run again, they run with the same contract
    register(http_contract("charge", downstream.url))
    for _ in range(3):
        assert _run_one(operator).status == NodeStatus.COMPLETED
    assert len(calls(downstream, "/charge")) == 3
