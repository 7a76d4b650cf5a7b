"""Preview sagas over REST: begin with preview, read the report, promote; tenancy and roles as everywhere."""

from __future__ import annotations

from rest_framework.test import APIClient

from tests.api.conftest import API, ok, refused
from tests.contracts import http_contract, register
from tests.httpserver import RecordingHTTPServer
from tests.proxy.preview_session import GATE_COUNTS, GROUPS, dry_proxy_session


def _previewed(client: APIClient, url: str) -> str:
    register(http_contract("wire", url, approval_required=True, reversibility="irreversible"))
    saga = ok(client.post(f"{API}/sagas/", {"preview": True}, format="json"), 201)
    ok(client.post(f"{API}/sagas/{saga['id']}/nodes/", {"action": "wire", "input": {"n": 1}, "key": "w"}), 201)
    run = ok(client.post(f"{API}/sagas/{saga['id']}/run/", {"wait_seconds": 0}, format="json"))
    assert [n["status"] for n in run["workflow"]["nodes"]] == ["DRY"]
    return str(saga["id"])


def test_a_preview_reports_and_promotes_over_rest(
    alice: APIClient, vera: APIClient, downstream: RecordingHTTPServer
) -> None:
    saga_id = _previewed(alice, downstream.url)
    report = ok(vera.get(f"{API}/sagas/{saga_id}/preview-report/"))
    assert report["classes"][0]["class"] == "irreversible"
    assert [i["action"] for i in report["would_wait_for_approval"]] == ["wire"]
    refused(vera.post(f"{API}/sagas/{saga_id}/promote/"), 403)
    response = alice.post(f"{API}/sagas/{saga_id}/promote/")
    real = ok(response, 201)
    assert real["metadata"]["promoted_from"] == saga_id and response["Location"] == f"{API}/sagas/{real['id']}/"
    assert [n["status"] for n in real["workflow"]["nodes"]] == ["WAITING_APPROVAL"]
    assert downstream.requests == []


def test_the_report_of_a_real_or_foreign_saga_is_refused(
    alice: APIClient, mallory: APIClient, downstream: RecordingHTTPServer
) -> None:
    saga_id = _previewed(alice, downstream.url)
    refused(mallory.get(f"{API}/sagas/{saga_id}/preview-report/"), 404, "SAGA_NOT_FOUND")
    refused(mallory.post(f"{API}/sagas/{saga_id}/promote/"), 404, "SAGA_NOT_FOUND")
    real = ok(alice.post(f"{API}/sagas/", {}, format="json"), 201)
    refused(alice.get(f"{API}/sagas/{real['id']}/preview-report/"), 409, "NOT_A_PREVIEW")


def test_a_proxy_session_run_dry_is_reported_by_class_over_rest(vera: APIClient, mallory: APIClient) -> None:
    session = dry_proxy_session()  # tests/proxy/preview_session.py: acme's session, two reads and six dry calls
    report = ok(vera.get(f"{API}/sagas/{session.id}/preview-report/"))
    assert report["grouping"] == "sagaz_class" and (report["reads_executed"], report["recorded_dry"]) == (2, 6)
    assert [(g["class"], g["count"], g["tools"]) for g in report["classes"]] == GROUPS
    assert [g["gates"] for g in report["classes"]] == GATE_COUNTS
    refused(mallory.get(f"{API}/sagas/{session.id}/preview-report/"), 404, "SAGA_NOT_FOUND")
