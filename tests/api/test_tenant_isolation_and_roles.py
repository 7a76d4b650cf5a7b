"""Tenancy and RBAC over REST: another tenant's saga is "Saga not found" everywhere; a viewer reads but cannot act."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from rest_framework.test import APIClient

from sagas import coordinator
from tests.api.conftest import ADA, ALICE, API, MALLORY, READER, VERA, ok, principal, refused
from tests.contracts import http_contract, register
from tests.httpserver import RecordingHTTPServer

SAGA_READS = ["", "timeline/", "audit-events/", "audit-events/verify/", "policy-decisions/"]
SAGA_WRITES = [
    ("commit/", {}),
    ("rollback/", {}),
    ("checkpoints/", {"name": "x"}),
    ("steps/", {"action": "wire", "input": {}}),
    ("nodes/", {"action": "wire", "input": {}}),
    ("run/", {"wait_seconds": 0}),
    ("nodes/w/approve/", {}),
    ("nodes/w/reject/", {"reason": "no"}),
    ("nodes/w/retry/", {}),
]


@pytest.fixture
def globex_saga(downstream: RecordingHTTPServer) -> str:
    """A globex saga with a node waiting for approval (key "w")."""
    register(http_contract("wire", downstream.url, approval_required=True))
    actor = principal(MALLORY)
    saga = coordinator.saga_begin(actor=actor, metadata={"owner": "globex"})
    coordinator.node_plan(actor=actor, saga_id=saga.id, action="wire", input={}, key="w")
    return str(saga.id)


@pytest.mark.parametrize("path", SAGA_READS)
def test_another_tenants_saga_reads_as_not_found(alice: APIClient, globex_saga: str, path: str):
    error = refused(alice.get(f"{API}/sagas/{globex_saga}/{path}"), 404, "SAGA_NOT_FOUND")
    assert error["message"].startswith(f"Saga not found: {globex_saga}.")


@pytest.mark.parametrize(("path", "body"), SAGA_WRITES)
def test_another_tenants_saga_cannot_be_changed(
    alice: APIClient, mallory: APIClient, globex_saga: str, path: str, body: dict[str, object]
):
    # when
    refused(alice.post(f"{API}/sagas/{globex_saga}/{path}", body), 404, "SAGA_NOT_FOUND")
    # then nothing changed for its owner
    saga = ok(mallory.get(f"{API}/sagas/{globex_saga}/"))
    assert saga["status"] == "ACTIVE" and [n["status"] for n in saga["workflow"]["nodes"]] == ["WAITING_APPROVAL"]
    assert saga["workflow"]["checkpoints"] == []


def test_missing_and_malformed_saga_ids_read_the_same_as_foreign_ones(alice: APIClient):
    refused(alice.get(f"{API}/sagas/00000000-0000-0000-0000-000000000000/"), 404, "SAGA_NOT_FOUND")
    refused(alice.get(f"{API}/sagas/not-a-uuid/"), 404, "SAGA_NOT_FOUND")


def test_lists_and_queues_show_only_the_callers_tenant(alice: APIClient, mallory: APIClient, globex_saga: str):
    # given one acme saga besides the globex one
    mine = ok(alice.post(f"{API}/sagas/"), 201)["id"]
    # then each tenant lists only its own
    assert [s["id"] for s in ok(alice.get(f"{API}/sagas/"))["sagas"]] == [mine]
    assert [s["id"] for s in ok(mallory.get(f"{API}/sagas/"))["sagas"]] == [globex_saga]
    assert ok(alice.get(f"{API}/approvals/"))["approvals"] == []
    assert [a["saga_id"] for a in ok(mallory.get(f"{API}/approvals/"))["approvals"]] == [globex_saga]


def test_another_tenants_policy_status_needs_admin(alice: APIClient, client_for: Callable[[str], APIClient]):
    refused(alice.get(f"{API}/policy/", {"tenant_id": "globex"}), 403, "FORBIDDEN")
    admin = client_for(ADA)
    assert ok(admin.get(f"{API}/policy/", {"tenant_id": "globex"}))["tenant_id"] == "globex"


@pytest.fixture
def acme_gate(downstream: RecordingHTTPServer) -> tuple[str, str]:
    register(http_contract("wire", downstream.url, approval_required=True))
    actor = principal(ALICE)
    saga = coordinator.saga_begin(actor=actor)
    node = coordinator.node_plan(actor=actor, saga_id=saga.id, action="wire", input={}, key="w")
    return str(saga.id), str(node.id)


@pytest.mark.parametrize("token", [VERA, READER], ids=["viewer-role", "read-scope"])
def test_readers_read_everything(client_for: Callable[[str], APIClient], acme_gate: tuple[str, str], token: str):
    reader = client_for(token)
    saga_id, node_id = acme_gate
    for path in SAGA_READS:
        ok(reader.get(f"{API}/sagas/{saga_id}/{path}"))
    assert [s["id"] for s in ok(reader.get(f"{API}/sagas/"))["sagas"]] == [saga_id]
    assert [a["id"] for a in ok(reader.get(f"{API}/approvals/"))["approvals"]] == [node_id]
    ok(reader.get(f"{API}/actions/"))
    ok(reader.get(f"{API}/actions/wire/"))
    ok(reader.get(f"{API}/policy/"))


@pytest.mark.parametrize(("path", "body"), [("", {}), *SAGA_WRITES])
def test_viewer_cannot_act(vera: APIClient, alice: APIClient, acme_gate: tuple[str, str], path: str, body: dict):
    # given
    saga_id, _ = acme_gate
    url = f"{API}/sagas/" if path == "" else f"{API}/sagas/{saga_id}/{path}"
    # when
    error = refused(vera.post(url, body), 403, "FORBIDDEN")
    # then the refusal names the capability, and nothing changed
    needed = "decide" if path.endswith(("approve/", "reject/")) else "execute"
    assert needed in error["message"] and error["capability"] == needed
    saga = ok(alice.get(f"{API}/sagas/{saga_id}/"))
    assert saga["status"] == "ACTIVE" and saga["workflow"]["nodes"][0]["status"] == "WAITING_APPROVAL"
    assert len(ok(alice.get(f"{API}/sagas/"))["sagas"]) == 1
