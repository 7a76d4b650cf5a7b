"""GET /api/v1/sagas/: newest first, cursor pages, filters by status, creation time and action."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from rest_framework.test import APIClient

from sagas.models import Saga
from tests.api.conftest import API, ok, refused
from tests.contracts import http_contract, register
from tests.httpserver import RecordingHTTPServer


def _begin(client: APIClient, n: int) -> list[str]:
    return [ok(client.post(f"{API}/sagas/", {"metadata": {"n": i}}), 201)["id"] for i in range(n)]


def test_pages_walk_every_saga_once_newest_first(alice: APIClient):
    # given five sagas
    ids = _begin(alice, 5)
    # when paged two at a time
    seen: list[str] = []
    cursor = None
    for _ in range(5):
        page = ok(alice.get(f"{API}/sagas/", {"limit": 2, **({"cursor": cursor} if cursor else {})}))
        seen += [s["id"] for s in page["sagas"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    # then
    assert seen == list(reversed(ids))
    summary = ok(alice.get(f"{API}/sagas/", {"limit": 1}))["sagas"][0]
    assert "steps" not in summary and summary["metadata"]["n"] == 4


def test_a_page_is_stable_when_new_sagas_arrive(alice: APIClient):
    ids = _begin(alice, 3)
    first = ok(alice.get(f"{API}/sagas/", {"limit": 2}))
    _begin(alice, 2)  # newer sagas arrive between pages
    second = ok(alice.get(f"{API}/sagas/", {"limit": 2, "cursor": first["next_cursor"]}))
    assert [s["id"] for s in second["sagas"]] == [ids[0]] and second["next_cursor"] is None


def test_status_filter(alice: APIClient):
    active, rolled_back = _begin(alice, 2)
    ok(alice.post(f"{API}/sagas/{rolled_back}/rollback/"))
    assert [s["id"] for s in ok(alice.get(f"{API}/sagas/", {"status": "ROLLED_BACK"}))["sagas"]] == [rolled_back]
    assert [s["id"] for s in ok(alice.get(f"{API}/sagas/", {"status": "ACTIVE"}))["sagas"]] == [active]


def test_created_after_and_before_filters(alice: APIClient):
    # given three sagas a day apart
    old, middle, new = _begin(alice, 3)
    now = datetime.now(UTC)
    for saga_id, days in ((old, 2), (middle, 1)):
        Saga.objects.filter(pk=saga_id).update(created_at=now - timedelta(days=days))
    # then each bound is exclusive, accepts offsets, and a missing offset means UTC
    after = (now - timedelta(days=1, hours=1)).isoformat()
    assert [s["id"] for s in ok(alice.get(f"{API}/sagas/", {"created_after": after}))["sagas"]] == [new, middle]
    before = (now - timedelta(hours=12)).astimezone(UTC).replace(tzinfo=None).isoformat()
    assert [s["id"] for s in ok(alice.get(f"{API}/sagas/", {"created_before": before}))["sagas"]] == [middle, old]
    both = {"created_after": after, "created_before": (now - timedelta(hours=12)).isoformat().replace("+00:00", "Z")}
    assert [s["id"] for s in ok(alice.get(f"{API}/sagas/", both))["sagas"]] == [middle]


def test_action_filter_matches_planned_nodes_and_executed_steps(alice: APIClient, downstream: RecordingHTTPServer):
    # given one saga that planned "reserve" twice, one that executed it, one that did something else
    register(http_contract("reserve", downstream.url))
    register(http_contract("notify", downstream.url))
    planned, executed, other = _begin(alice, 3)
    for key in ("a", "b"):
        ok(alice.post(f"{API}/sagas/{planned}/nodes/", {"action": "reserve", "input": {}, "key": key}), 201)
    ok(alice.post(f"{API}/sagas/{executed}/steps/", {"action": "reserve", "input": {}}), 201)
    ok(alice.post(f"{API}/sagas/{other}/nodes/", {"action": "notify", "input": {}}), 201)
    # then each matching saga is listed once, and filters combine
    listed = ok(alice.get(f"{API}/sagas/", {"action": "reserve"}))["sagas"]
    assert [s["id"] for s in listed] == [executed, planned]
    combined = ok(alice.get(f"{API}/sagas/", {"action": "reserve", "limit": 1}))
    assert [s["id"] for s in combined["sagas"]] == [executed]
    rest = ok(alice.get(f"{API}/sagas/", {"action": "reserve", "cursor": combined["next_cursor"]}))
    assert [s["id"] for s in rest["sagas"]] == [planned]
    assert ok(alice.get(f"{API}/sagas/", {"action": "nothing"}))["sagas"] == []


def test_out_of_range_timestamps_are_400(alice: APIClient):
    refused(alice.get(f"{API}/sagas/", {"created_after": "0001-01-01T00:00:00+05:00"}), 400, "INVALID_INPUT")
