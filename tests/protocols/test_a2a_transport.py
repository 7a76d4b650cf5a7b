"""Black-box A2A discovery and transport: the public agent card and its caching, bearer auth, the JSON-RPC
endpoint's paths and the protocol errors the SDK (or our Content-Type check) answers."""

from __future__ import annotations

import asyncio
from email.utils import parsedate_to_datetime
from typing import Any

import httpx
import pytest

from sagas.models import A2ATask
from tests.protocols.a2a_client import connect, rpc
from tests.protocols.conftest import ALICE, RunningServer

CARD = "/.well-known/agent-card.json"
LIST_SAGAS = {"message": {"messageId": "m1", "role": "ROLE_USER", "parts": [{"data": {"operation": "list_sagas"}}]}}
JSON = {"Content-Type": "application/json", "A2A-Version": "1.0", "Authorization": f"Bearer {ALICE}"}


def test_card_advertises_one_durable_jsonrpc_interface_bearer_auth_and_four_skills(server: RunningServer):
    answer = httpx.get(server.base + CARD, timeout=10)  # no token: the card is public

    assert answer.status_code == 200
    card = answer.json()
    assert card["name"] == "Semantic Saga" and card["version"] and card["description"]
    assert card["supportedInterfaces"] == [
        {"url": f"{server.base}/a2a", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}
    ]
    # nothing that is not durable is claimed
    assert card["capabilities"] == {"streaming": False, "pushNotifications": False}
    assert card["defaultInputModes"] == card["defaultOutputModes"] == ["application/json"]
    assert card["securitySchemes"]["bearer"]["httpAuthSecurityScheme"]["scheme"] == "bearer"
    assert card["securityRequirements"] == [{"schemes": {"bearer": {}}}]
    skills = {skill["id"]: skill for skill in card["skills"]}
    assert set(skills) == {
        "transactional-orchestration",
        "governed-side-effects",
        "transaction-inspection",
        "saga-preview",
    }
    assert all(skill["examples"] and '"operation"' in skill["examples"][0] for skill in skills.values())


def test_card_is_cacheable_and_revalidates_with_its_etag(server: RunningServer):
    first = httpx.get(server.base + CARD, timeout=10)
    etag, cache_control = first.headers["etag"], first.headers["cache-control"]
    assert etag.startswith('W/"') and "max-age=" in cache_control
    assert parsedate_to_datetime(first.headers["last-modified"]).tzinfo is not None

    again = httpx.get(server.base + CARD, headers={"If-None-Match": etag}, timeout=10)
    stale = httpx.get(server.base + CARD, headers={"If-None-Match": 'W/"something-else"'}, timeout=10)

    assert again.status_code == 304 and not again.content
    assert again.headers["etag"] == etag and "max-age=" in again.headers["cache-control"]
    assert again.headers["last-modified"] == first.headers["last-modified"]
    assert stale.status_code == 200 and stale.json() == first.json()


def test_rpc_without_a_token_gets_401_while_the_card_stays_public(server: RunningServer):
    no_token = rpc(server.base, "SendMessage", LIST_SAGAS, {"Content-Type": "application/json", "A2A-Version": "1.0"})
    bad_token = rpc(server.base, "SendMessage", LIST_SAGAS, {**JSON, "Authorization": "Bearer not-a-real-token-000"})

    for answer in (no_token, bad_token):
        assert answer.status_code == 401 and answer.headers["www-authenticate"].startswith("Bearer")
    assert httpx.get(server.base + CARD, timeout=10).status_code == 200
    assert A2ATask.objects.count() == 0


def test_trailing_slash_endpoint_serves_the_same_rpc(server: RunningServer):
    answer = httpx.post(
        f"{server.base}/a2a/",
        json={"jsonrpc": "2.0", "id": 7, "method": "SendMessage", "params": LIST_SAGAS},
        headers=JSON,
        timeout=30,
    )

    assert answer.status_code == 200
    task = answer.json()["result"]["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED" and task["artifacts"][0]["name"] == "semantic-saga-result"


@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded", None])
def test_a_body_not_declared_as_json_gets_32005(server: RunningServer, content_type: str | None):
    headers = {key: value for key, value in JSON.items() if key != "Content-Type"}
    if content_type:
        headers["Content-Type"] = content_type

    error = rpc(server.base, "SendMessage", LIST_SAGAS, headers).json()["error"]

    assert error["code"] == -32005 and "application/json" in error["message"]
    assert A2ATask.objects.count() == 0


def test_a_part_in_a_media_type_the_card_does_not_list_gets_32005(server: RunningServer):
    params = {"message": {**LIST_SAGAS["message"], "parts": [{"data": {}, "mediaType": "text/plain"}]}}

    error = rpc(server.base, "SendMessage", params, JSON).json()["error"]

    assert error["code"] == -32005 and "text/plain" in error["message"]


def test_missing_version_header_gets_32009(server: RunningServer):
    headers = {key: value for key, value in JSON.items() if key != "A2A-Version"}

    answer = rpc(server.base, "SendMessage", LIST_SAGAS, headers)

    assert answer.status_code == 200  # JSON-RPC errors travel in the body
    error = answer.json()["error"]
    assert error["code"] == -32009 and "'1.0'" in error["message"]
    assert A2ATask.objects.count() == 0


def test_streaming_and_v03_method_names_are_refused(server: RunningServer):
    streaming = rpc(server.base, "SendStreamingMessage", LIST_SAGAS, JSON).json()["error"]
    legacy = rpc(server.base, "message/send", LIST_SAGAS, JSON).json()["error"]

    assert streaming["code"] == -32004  # the card says streaming: false
    assert legacy["code"] == -32601


def test_the_sdk_client_uses_only_the_card_to_reach_the_endpoint(server: RunningServer):
    async def scenario() -> Any:
        async with connect(server.base, ALICE) as peer:
            assert peer.card.supported_interfaces[0].url == f"{server.base}/a2a"
            return await peer.ok({"operation": "list_actions"})

    assert asyncio.run(scenario()) == {"actions": []}
