"""Driving a saga end to end over REST: begin, plan, run, checkpoint, commit, execute, rollback, evidence reads."""

from __future__ import annotations

from rest_framework.test import APIClient

from tests.api.conftest import API, ok, refused
from tests.contracts import http_contract, register
from tests.httpserver import RecordingHTTPServer


def test_begin_answers_201_with_the_saga_and_its_location(alice: APIClient):
    # when
    response = alice.post(f"{API}/sagas/", {"metadata": {"ticket": "T-1"}}, format="json")
    # then
    saga = ok(response, 201)
    assert saga["status"] == "ACTIVE" and saga["tenant_id"] == "acme" and saga["creator_principal_id"] == "alice"
    assert saga["metadata"]["ticket"] == "T-1" and saga["metadata"]["_identity"]["protocol"] == "rest"
    assert response["Location"] == f"{API}/sagas/{saga['id']}/"
    assert ok(alice.get(response["Location"]))["id"] == saga["id"]


def test_planned_nodes_run_and_commit(alice: APIClient, downstream: RecordingHTTPServer):
    # given two registered actions, one depending on the other
    register(http_contract("reserve", downstream.url))
    register(http_contract("charge", downstream.url))
    saga_id = ok(alice.post(f"{API}/sagas/", {}, format="json"), 201)["id"]
    first = ok(alice.post(f"{API}/sagas/{saga_id}/nodes/", {"action": "reserve", "input": {"n": 1}, "key": "r"}), 201)
    second = ok(
        alice.post(f"{API}/sagas/{saga_id}/nodes/", {"action": "charge", "input": {}, "depends_on": ["r"]}), 201
    )
    assert first["status"] == "READY" and second["status"] == "WAITING_DEPENDENCY"
    assert second["depends_on"] == [first["id"]]
    # when run, then checkpointed and committed
    run = ok(alice.post(f"{API}/sagas/{saga_id}/run/", {"wait_seconds": 20}, format="json"))
    assert run["run"]["settled"] is True
    assert [n["status"] for n in run["workflow"]["nodes"]] == ["COMPLETED", "COMPLETED"]
    checkpoint = ok(alice.post(f"{API}/sagas/{saga_id}/checkpoints/", {"name": "paid", "data": {"x": 1}}), 201)
    assert checkpoint["name"] == "paid" and checkpoint["saga_id"] == saga_id
    committed = ok(alice.post(f"{API}/sagas/{saga_id}/commit/"))
    # then
    assert committed["status"] == "COMMITTED"
    assert [c["name"] for c in committed["workflow"]["checkpoints"]] == ["paid"]
    assert [r.path for r in downstream.requests] == ["/reserve", "/charge"]


def test_replanning_a_key_returns_the_same_node(alice: APIClient, downstream: RecordingHTTPServer):
    register(http_contract("reserve", downstream.url))
    saga_id = ok(alice.post(f"{API}/sagas/"), 201)["id"]
    body = {"action": "reserve", "input": {"n": 1}, "key": "r"}
    first = ok(alice.post(f"{API}/sagas/{saga_id}/nodes/", body, format="json"), 201)
    again = ok(alice.post(f"{API}/sagas/{saga_id}/nodes/", body, format="json"), 201)
    assert again["id"] == first["id"]


def test_execute_runs_one_step_and_rollback_compensates_it(alice: APIClient, downstream: RecordingHTTPServer):
    # given a step executed at once
    register(http_contract("reserve", downstream.url))
    saga_id = ok(alice.post(f"{API}/sagas/"), 201)["id"]
    step = ok(alice.post(f"{API}/sagas/{saga_id}/steps/", {"action": "reserve", "input": {"n": 2}}, format="json"), 201)
    assert step["status"] == "COMPLETED" and step["saga_status"] == "ACTIVE" and step["input"] == {"n": 2}
    # when rolled back
    saga = ok(alice.post(f"{API}/sagas/{saga_id}/rollback/"))
    # then the step was compensated
    assert saga["status"] == "ROLLED_BACK"
    assert [r.path for r in downstream.requests] == ["/reserve", "/reserve/undo"]
    # and a second rollback of a rolled-back saga is a 409 that says why
    error = refused(alice.post(f"{API}/sagas/{saga_id}/rollback/"), 409, "ROLLBACK_REFUSED")
    assert "ROLLED_BACK" in error["message"]


def test_a_failed_execute_answers_422_with_the_sagas_reaction(alice: APIClient, downstream: RecordingHTTPServer):
    # given an action whose downstream refuses for good
    register(http_contract("reserve", downstream.url, max_attempts=1))
    downstream.script("/reserve", [(400, {"error": "no stock"})])
    saga_id = ok(alice.post(f"{API}/sagas/"), 201)["id"]
    # when
    error = refused(
        alice.post(f"{API}/sagas/{saga_id}/steps/", {"action": "reserve", "input": {}}, format="json"),
        422,
        "ACTION_FAILED_PERMANENT",
    )
    # then the body says what happened to the saga
    assert error["saga_status"] in ("ROLLED_BACK", "RECOVERY_REQUIRED", "FAILED") and error["step_id"]


def test_commit_with_unfinished_nodes_is_409_listing_them(alice: APIClient, downstream: RecordingHTTPServer):
    register(http_contract("reserve", downstream.url))
    saga_id = ok(alice.post(f"{API}/sagas/"), 201)["id"]
    ok(alice.post(f"{API}/sagas/{saga_id}/nodes/", {"action": "reserve", "input": {}, "key": "r"}), 201)
    error = refused(alice.post(f"{API}/sagas/{saga_id}/commit/"), 409, "UNFINISHED_NODES")
    assert error["nodes"][0]["key"] == "r"


def test_evidence_reads_timeline_audit_verify_and_policy(alice: APIClient, downstream: RecordingHTTPServer):
    # given a saga with one executed step
    register(http_contract("reserve", downstream.url))
    saga_id = ok(alice.post(f"{API}/sagas/"), 201)["id"]
    ok(alice.post(f"{API}/sagas/{saga_id}/steps/", {"action": "reserve", "input": {"secret": "s3"}}), 201)
    # then the timeline carries no payload and a valid chain
    timeline = ok(alice.get(f"{API}/sagas/{saga_id}/timeline/", {"limit": 2}))
    assert "input" not in timeline["steps"][0] and len(timeline["events"]) == 2
    assert timeline["integrity"]["valid"] is True
    # and audit events filter by type, oldest first
    events = ok(alice.get(f"{API}/sagas/{saga_id}/audit-events/"))["events"]
    assert events[0]["event_type"] == "SAGA_STARTED"
    assert [e["sequence"] for e in events] == sorted(e["sequence"] for e in events)
    started = ok(alice.get(f"{API}/sagas/{saga_id}/audit-events/?event_types=SAGA_STARTED&event_types=STEP_COMPLETED"))
    assert {e["event_type"] for e in started["events"]} == {"SAGA_STARTED", "STEP_COMPLETED"}
    # and the chain verifies
    verified = ok(alice.get(f"{API}/sagas/{saga_id}/audit-events/verify/"))
    assert verified == {**verified, "saga_id": saga_id, "valid": True, "events_checked": len(events)}
    # and policy reads answer for the caller's tenant
    assert ok(alice.get(f"{API}/policy/"))["tenant_id"] == "acme"
    decisions = ok(alice.get(f"{API}/sagas/{saga_id}/policy-decisions/", {"limit": 10}))
    assert decisions["saga_id"] == saga_id and isinstance(decisions["decisions"], list)


def test_actions_list_and_detail_with_version(alice: APIClient, downstream: RecordingHTTPServer):
    # given two versions of one action, the second active
    register(http_contract("reserve", downstream.url, version="1.0.0", active=False))
    register(http_contract("reserve", downstream.url, version="2.0.0"))
    # then the list shows the active version, the detail any version asked for
    listed = ok(alice.get(f"{API}/actions/"))["actions"]
    assert [(a["id"], a["version"]) for a in listed] == [("reserve", "2.0.0")]
    assert ok(alice.get(f"{API}/actions/reserve/"))["version"] == "2.0.0"
    old = ok(alice.get(f"{API}/actions/reserve/", {"version": "1.0.0"}))
    assert old["version"] == "1.0.0" and "resolved_execution_policy" in old
    refused(alice.get(f"{API}/actions/nope/"), 404, "ACTION_NOT_FOUND")
    refused(alice.get(f"{API}/actions/reserve/", {"version": "9.9.9"}), 404)
