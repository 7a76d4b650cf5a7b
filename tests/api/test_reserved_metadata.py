"""What a saga is, a caller cannot choose: `metadata.proxy` (what makes a proxy session, whose rollback is the proxy's
undo walk) and `metadata._identity` are the server's to write. A caller that tries to pass a saga off as a proxy
session, to have an uncompensable step skipped by its rollback, is refused before anything is written."""

from __future__ import annotations

from rest_framework.test import APIClient

from sagas.models import Saga
from tests.api.conftest import API, ok, refused
from tests.contracts import http_contract, register
from tests.httpserver import RecordingHTTPServer


def test_begin_refuses_the_metadata_keys_only_the_server_writes(alice: APIClient):
    for metadata in ({"proxy": {}}, {"proxy": {"client": {"name": "claude"}}, "order": 1}, {"_identity": {}}):
        answer = alice.post(f"{API}/sagas/", {"metadata": metadata}, format="json")
        error = refused(answer, 400)
        assert error["code"] == "RESERVED_METADATA_KEY"
        assert "Nothing was written" in error["message"] and "proxy session" in error["message"]
    assert not Saga.objects.exists()


def test_a_rollback_that_cannot_undo_a_step_is_visible_as_rollback_failed(
    alice: APIClient, downstream: RecordingHTTPServer
):
    # given a saga (the caller cannot make it a proxy session) with one step that declares no compensation
    register(http_contract("wire", downstream.url, reversibility="irreversible"))
    saga = ok(alice.post(f"{API}/sagas/", {"metadata": {"order": 7}}, format="json"), 201)
    ok(alice.post(f"{API}/sagas/{saga['id']}/steps/", {"action": "wire", "input": {}}, format="json"), 201)
    # when it is rolled back
    rolled = ok(alice.post(f"{API}/sagas/{saga['id']}/rollback/", {}, format="json"))
    # then the step that could not be undone shows: ROLLBACK_FAILED, never a silent ROLLED_BACK
    assert rolled["status"] == "ROLLBACK_FAILED"
    assert Saga.objects.get(pk=saga["id"]).kind == "saga"
