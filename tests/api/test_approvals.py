"""The approval queue over REST: list (oldest first, paged, tenant-scoped), approve, reject with a reason, retry."""

from __future__ import annotations

import jsonschema
from rest_framework.test import APIClient

from sagas import coordinator
from sagas.operations.schemas import APPROVAL_PAGE
from tests.api.conftest import ALICE, API, MALLORY, ok, principal, refused
from tests.approvals import CHARGE_INPUT, LONG_NOTE, digest_of, plan_charge
from tests.contracts import http_contract, register
from tests.httpserver import RecordingHTTPServer


def _gated_saga(token: str, action: str = "wire", key: str = "w") -> tuple[str, str]:
    """A saga (of the token's tenant) with one node waiting for approval: (saga id, node id)."""
    actor = principal(token)
    saga = coordinator.saga_begin(actor=actor)
    node = coordinator.node_plan(actor=actor, saga_id=saga.id, action=action, input={"amount": 5}, key=key)
    return str(saga.id), str(node.id)


def test_queue_lists_the_tenants_waiting_nodes_oldest_first_in_pages(alice: APIClient, downstream: RecordingHTTPServer):
    # given three gated sagas in acme and one in globex
    register(http_contract("wire", downstream.url, approval_required=True))
    waiting = [_gated_saga(ALICE) for _ in range(3)]
    _gated_saga(MALLORY)
    # when paged two at a time
    first = ok(alice.get(f"{API}/approvals/", {"limit": 2}))
    second = ok(alice.get(f"{API}/approvals/", {"limit": 2, "cursor": first["next_cursor"]}))
    # then every acme node appears once, oldest request first, and nothing of globex
    listed = [(a["saga_id"], a["id"]) for a in first["approvals"] + second["approvals"]]
    assert listed == waiting and second["next_cursor"] is None
    entry = first["approvals"][0]
    assert entry["status"] == "WAITING_APPROVAL" and entry["saga_status"] == "ACTIVE"
    assert entry["input"] == {"amount": 5} and entry["approval"]["status"] == "PENDING"
    assert entry["approval"]["requested_by"] == "contract"  # the gate came from the action contract


def test_approve_makes_the_node_runnable(alice: APIClient, bob: APIClient, downstream: RecordingHTTPServer):
    # given
    register(http_contract("wire", downstream.url, approval_required=True))
    saga_id, node_id = _gated_saga(ALICE)
    # when bob approves by key
    node = ok(bob.post(f"{API}/sagas/{saga_id}/nodes/w/approve/", {"reason": "fine"}))
    # then
    assert node["id"] == node_id and node["status"] == "READY"
    assert node["approval"]["status"] == "APPROVED" and node["approval"]["principal_id"] == "bob"
    assert ok(alice.get(f"{API}/approvals/"))["approvals"] == []
    run = ok(alice.post(f"{API}/sagas/{saga_id}/run/", {"wait_seconds": 20}))
    assert run["workflow"]["nodes"][0]["status"] == "COMPLETED"
    # and approving again is a 409 that says the node is not waiting
    refused(bob.post(f"{API}/sagas/{saga_id}/nodes/{node_id}/approve/"), 409, "NODE_NOT_WAITING_APPROVAL")


def test_reject_needs_a_reason_and_stops_the_saga_until_retried(
    alice: APIClient, bob: APIClient, downstream: RecordingHTTPServer
):
    # given
    register(http_contract("wire", downstream.url, approval_required=True))
    saga_id, node_id = _gated_saga(ALICE)
    # when rejected without a reason
    error = refused(bob.post(f"{API}/sagas/{saga_id}/nodes/{node_id}/reject/", {}), 400, "INVALID_ARGUMENTS")
    assert any(p.startswith("reason") for p in error["problems"])
    # and with one
    node = ok(bob.post(f"{API}/sagas/{saga_id}/nodes/{node_id}/reject/", {"reason": "wrong account"}))
    # then the node is rejected, the saga waits for recovery, the queue is empty
    assert node["status"] == "REJECTED" and node["approval"]["reason"] == "wrong account"
    assert ok(alice.get(f"{API}/sagas/{saga_id}/"))["status"] == "RECOVERY_REQUIRED"
    assert ok(alice.get(f"{API}/approvals/"))["approvals"] == []
    # when retried, approval is requested again
    retried = ok(alice.post(f"{API}/sagas/{saga_id}/nodes/{node_id}/retry/", {"force": False}))
    assert retried["status"] == "WAITING_APPROVAL"
    assert [a["id"] for a in ok(alice.get(f"{API}/approvals/"))["approvals"]] == [node_id]


def test_approved_flag_is_decided_by_the_url(bob: APIClient, downstream: RecordingHTTPServer):
    register(http_contract("wire", downstream.url, approval_required=True))
    saga_id, node_id = _gated_saga(ALICE)
    error = refused(
        bob.post(f"{API}/sagas/{saga_id}/nodes/{node_id}/approve/", {"approved": False}), 400, "INVALID_ARGUMENTS"
    )
    assert "approved" in error["message"]


def test_unknown_node_is_404(bob: APIClient, downstream: RecordingHTTPServer):
    register(http_contract("wire", downstream.url, approval_required=True))
    saga_id, _ = _gated_saga(ALICE)
    refused(bob.post(f"{API}/sagas/{saga_id}/nodes/nope/approve/"), 404, "NODE_NOT_FOUND")


def test_retry_of_an_uncertain_node_needs_force(alice: APIClient, downstream: RecordingHTTPServer):
    # given a node whose only attempt timed out (outcome unknown) in pause mode
    contract = http_contract("wire", downstream.url, max_attempts=1, failure_mode="pause")
    contract["forward"]["timeout_seconds"] = 0.5
    register(contract)
    downstream.script("/wire", [(200, {}, 2.0)])
    saga_id = ok(alice.post(f"{API}/sagas/"), 201)["id"]
    node_id = ok(alice.post(f"{API}/sagas/{saga_id}/nodes/", {"action": "wire", "input": {}}), 201)["id"]
    ok(alice.post(f"{API}/sagas/{saga_id}/run/", {"wait_seconds": 30}))
    node = ok(alice.get(f"{API}/sagas/{saga_id}/"))["workflow"]["nodes"][0]
    assert node["uncertain_outcome"] is True, node
    # when retried without force, then with it
    refused(alice.post(f"{API}/sagas/{saga_id}/nodes/{node_id}/retry/"), 409, "UNCERTAIN_OUTCOME")
    assert ok(alice.post(f"{API}/sagas/{saga_id}/nodes/{node_id}/retry/", {"force": True}))["status"] == "READY"


def test_queue_entry_carries_what_the_approver_judges(alice: APIClient, downstream: RecordingHTTPServer):
    # given a card charge with a long note, waiting for approval
    _saga, node = plan_charge(principal(ALICE), downstream, note=LONG_NOTE)
    # when the queue is read
    page = ok(alice.get(f"{API}/approvals/"))
    # then the entry conforms to the published component and carries the input, the contract's facts, the reason
    # and the digest the approval binds to
    jsonschema.validate(page, APPROVAL_PAGE)
    entry = page["approvals"][0]
    context = entry["approval_context"]
    assert entry["input"] == {**CHARGE_INPUT, "note": LONG_NOTE}
    assert (context["risk"], context["reversibility"]) == ("low", "compensable")
    assert context["compensation"] == f"POST {downstream.url}/refunds"
    assert context["consequence"] == f"compensable — corrected afterwards by POST {downstream.url}/refunds"
    assert context["required_by"] == "contract" and "charge@1.0.0 requires approval" in context["required_because"]
    assert context["input_digest"] == digest_of(entry["input"]) == entry["approval"]["input_digest"]
    assert context["input_digest_current"] is True and context["definition_hash"] == entry["action_definition_hash"]
    # and long values come as a folded preview beside the whole value
    preview = {p["field"]: p for p in context["input_preview"]}
    assert preview["amount"] == {"field": "amount", "preview": "4200", "folded": False}
    assert preview["note"]["folded"] is True and preview["note"]["preview"].endswith("…")
    assert len(preview["note"]["preview"]) < len(LONG_NOTE) and str(node.id) == entry["id"]
