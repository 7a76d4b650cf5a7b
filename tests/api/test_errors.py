"""Refusals over REST: one body shape {"error": {"code", "message"}}, a fitting status, never a 500 for bad input."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from rest_framework.test import APIClient

from governance import kill_switch
from governance.errors import ServiceError
from sagas.api.errors import status_for
from sagas.errors import ActionFailedPermanent, InvalidTransition, NotFound, SagaError, StaleState
from tests.api.conftest import ADA, API, ok, principal, refused
from tests.contracts import http_contract, register
from tests.httpserver import RecordingHTTPServer


@pytest.fixture
def saga_id(alice: APIClient) -> str:
    return str(ok(alice.post(f"{API}/sagas/"), 201)["id"])


def test_malformed_json_is_400_saying_what_to_send(alice: APIClient):
    response = alice.generic("POST", f"{API}/sagas/", "{not json", content_type="application/json")
    error = refused(response, 400, "INVALID_JSON")
    assert "application/json" in error["message"]


@pytest.mark.parametrize("body", ["[]", '"text"', "3", "null"])
def test_a_body_that_is_not_an_object_is_400(alice: APIClient, body: str):
    response = alice.generic("POST", f"{API}/sagas/", body, content_type="application/json")
    refused(response, 400, "INVALID_ARGUMENTS")


def test_a_form_body_is_415(alice: APIClient):
    response = alice.post(f"{API}/sagas/", "metadata=x", content_type="application/x-www-form-urlencoded")
    refused(response, 415, "UNSUPPORTED_MEDIA_TYPE")


def test_a_body_without_content_type_is_415(alice: APIClient):
    response = alice.generic("POST", f"{API}/sagas/", '{"metadata": {}}', content_type="")
    refused(response, 415, "UNSUPPORTED_MEDIA_TYPE")


@pytest.mark.parametrize(
    ("path", "body", "problem"),
    [
        ("run/", {"max_parallel": "4"}, "max_parallel"),  # strict: a string is not an integer
        ("run/", {"max_parallel": 99}, "max_parallel"),  # out of range
        ("run/", {"max_steps": True}, "max_steps"),  # a boolean is not an integer
        ("nodes/", {"action": "x"}, "input"),  # missing
        ("nodes/", {"action": "x", "input": [], "surprise": 1}, "surprise"),  # unknown field
        ("checkpoints/", {"name": ""}, "name"),
        ("steps/", {"action": 5, "input": {}}, "action"),
    ],
)
def test_wrong_types_and_unknown_fields_are_400_listing_each_problem(
    alice: APIClient, saga_id: str, path: str, body: dict[str, object], problem: str
):
    error = refused(alice.post(f"{API}/sagas/{saga_id}/{path}", body), 400, "INVALID_ARGUMENTS")
    assert any(p.startswith(problem) for p in error["problems"]), error
    assert "Nothing was created or changed" in error["message"]


def test_url_values_cannot_be_overridden_by_the_body_or_query(alice: APIClient, saga_id: str):
    refused(alice.post(f"{API}/sagas/{saga_id}/commit/", {"saga_id": saga_id}), 400, "INVALID_ARGUMENTS")
    refused(alice.get(f"{API}/sagas/{saga_id}/", {"saga_id": saga_id}), 400, "INVALID_ARGUMENTS")


@pytest.mark.parametrize(
    "query",
    [{"limit": "0"}, {"limit": "many"}, {"surprise": "1"}, {"status": "DONE"}, {"created_after": "yesterday"}],
)
def test_bad_query_parameters_are_400(alice: APIClient, query: dict[str, str]):
    refused(alice.get(f"{API}/sagas/", query), 400)


def test_a_repeated_single_valued_parameter_is_400(alice: APIClient):
    error = refused(alice.get(f"{API}/sagas/?limit=1&limit=2"), 400, "INVALID_ARGUMENTS")
    assert "2 times" in error["message"]


@pytest.mark.parametrize(
    "request_args",
    [
        ("POST", "sagas/", '{"metadata": {"a": "nul\\u0000"}}'),
        ("POST", "sagas/", '{"metadata": {"nul\\u0000key": 1}}'),
        ("POST", "sagas/", '{"metadata": {"a": "\\ud800"}}'),
        ("GET", "sagas/?action=a%00b", ""),
        ("GET", "actions/a%00b/", ""),
        ("GET", "policy/?tenant_id=a%00b", ""),
    ],
)
def test_text_no_database_can_store_is_400_not_500(alice: APIClient, request_args: tuple[str, str, str]):
    method, path, body = request_args
    response = alice.generic(method, f"{API}/{path}", body, content_type="application/json")
    refused(response, 400, "INVALID_INPUT")


def test_a_node_id_with_nul_is_400(alice: APIClient, saga_id: str):
    refused(alice.post(f"{API}/sagas/{saga_id}/nodes/a%00b/retry/"), 400, "INVALID_INPUT")


def test_a_forged_cursor_is_400(alice: APIClient):
    for cursor in ["!!!", "WyJ4IiwgInkiXQ", "WyIyMDI1LTAxLTAxVDAwOjAwOjAwIiwgIm5vdC1hLXV1aWQiXQ"]:
        error = refused(alice.get(f"{API}/sagas/", {"cursor": cursor}), 400, "INVALID_INPUT")
        assert "next_cursor" in error["message"]
        refused(alice.get(f"{API}/approvals/", {"cursor": cursor}), 400, "INVALID_INPUT")


def test_wrong_method_is_405_and_unknown_paths_are_json_404(alice: APIClient, saga_id: str):
    response = alice.delete(f"{API}/sagas/{saga_id}/")
    refused(response, 405, "METHOD_NOT_ALLOWED")
    assert "GET" in response["Allow"]
    refused(alice.get(f"{API}/nothing-here/"), 404, "NOT_FOUND")
    error = refused(alice.post(f"{API}/sagas"), 404, "NOT_FOUND")
    assert "end with a slash" in error["message"]


def test_a_kill_switch_is_409_and_says_to_wait(alice: APIClient):
    kill_switch.kill_switch_engage(actor=principal(ADA), reason="incident 7")
    error = refused(alice.post(f"{API}/sagas/"), 409, "KILL_SWITCH_ENGAGED")
    assert "incident 7" in error["message"]


@pytest.mark.parametrize(
    ("error", "status"),
    [
        (NotFound("SAGA_NOT_FOUND", "x"), 404),
        (InvalidTransition("SAGA_NOT_ACTIVE", "x"), 409),
        (StaleState("STALE_STATE", "x"), 409),
        (SagaError("POLICY_DENIED", "x"), 403),
        (SagaError("UNCERTAIN_OUTCOME", "x"), 409),
        (ActionFailedPermanent(message="x"), 422),
        (ServiceError("INVALID_POLICY_FILE", "x"), 503),
        (ServiceError("SOMETHING_ELSE", "x"), 400),
    ],
)
def test_status_mapping(error: ServiceError, status: int):
    assert status_for(error) == status


def test_a_policy_refusal_is_403_and_leaves_its_decision_as_evidence(
    alice: APIClient, saga_id: str, settings: Any, tmp_path: Path, downstream: RecordingHTTPServer
):
    # given a tenant policy that denies planning transfers
    register(http_contract("transfer", downstream.url))
    rule = {"id": "freeze", "effect": "deny", "reason": "transfers frozen", "match": {"actions": ["transfer"]}}
    policy = {"schema_version": 1, "revision": "r1", "default_effect": "allow", "tenants": {"acme": {"rules": [rule]}}}
    (tmp_path / "policy.json").write_text(json.dumps(policy))
    settings.SAGA_POLICY_MODE = "json"
    settings.SAGA_POLICY_FILE = str(tmp_path / "policy.json")
    # when
    error = refused(alice.post(f"{API}/sagas/{saga_id}/nodes/", {"action": "transfer", "input": {}}), 403)
    # then the refusal says why, and the decision is on record
    assert error["code"] == "POLICY_DENIED" and "transfers frozen" in error["message"]
    decisions = ok(alice.get(f"{API}/sagas/{saga_id}/policy-decisions/"))["decisions"]
    assert decisions[-1]["data"]["effect"] == "deny"


def test_a_string_over_the_argument_string_limit_is_400_and_creates_nothing(alice: APIClient, settings: Any):
    from sagas.models import Saga

    settings.SAGA_MAX_ARGUMENT_STRING_BYTES = 1024
    before = Saga.objects.count()
    error = refused(alice.post(f"{API}/sagas/", {"metadata": {"notes": "x" * 2000}}, format="json"), 400)
    assert error["code"] == "INVALID_ARGUMENTS" and "SAGA_MAX_ARGUMENT_STRING_BYTES" in error["message"], error
    assert "metadata.notes" in error["message"] and Saga.objects.count() == before
