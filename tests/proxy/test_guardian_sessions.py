"""Sessions of the proxy over HTTP are bound to the tenant and principal that opened them. Another principal (of
another tenant, or of the same one) presenting alice's `Mcp-Session-Id` is answered exactly as for an unknown id,
learns nothing of hers, and cannot end her session; stateless (2026-07-28) clients of two tenants with the same
principal and client name each get their own session."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from sagas.models import Saga
from tests.proxy.guardian import ALICE, ALICE_OF_GLOBEX, MALLORY, OLGA, Guarded, guarded_proxy, poll

pytestmark = pytest.mark.django_db(transaction=True)
LEGACY = "2025-11-25"
HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


def _post(guarded: Guarded, token: str, body: dict[str, Any], session: str | None = None) -> httpx.Response:
    headers = {**HEADERS, "Authorization": f"Bearer {token}", "MCP-Protocol-Version": LEGACY}
    if session:
        headers["Mcp-Session-Id"] = session
    return httpx.post(guarded.url, json=body, headers=headers, timeout=30)


def _open_session(guarded: Guarded, token: str) -> str:
    hello = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": LEGACY, "capabilities": {}, "clientInfo": {"name": "agent", "version": "1"}},
    }
    opened = _post(guarded, token, hello)
    assert opened.status_code == 200, opened.text
    session = opened.headers["mcp-session-id"]
    done = _post(guarded, token, {"jsonrpc": "2.0", "method": "notifications/initialized"}, session)
    assert done.status_code == 202, done.text
    return session


LIST = {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}}
CALL = {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "get_status", "arguments": {}}}


def test_another_principal_cannot_use_or_end_alices_session(tmp_path: Path):
    with guarded_proxy("http", tmp_path) as guarded:
        session = _open_session(guarded, ALICE)
        saga = poll(lambda: Saga.objects.filter(kind="proxy_session", tenant_id="acme").first(), "alice's session")
        unknown = _post(guarded, MALLORY, LIST, "0" * 32)
        for intruder in (MALLORY, OLGA):
            for body in (LIST, CALL):
                # presenting alice's session id answers exactly as an id nobody ever had
                answer = _post(guarded, intruder, body, session)
                assert (answer.status_code, answer.text) == (unknown.status_code, unknown.text) == (404, unknown.text)
                assert str(saga.id) not in answer.text
            ended = httpx.delete(
                guarded.url, headers={"Authorization": f"Bearer {intruder}", "Mcp-Session-Id": session}, timeout=30
            )
            assert ended.status_code == 404
        # alice's session is untouched: she lists and calls in it, in the same saga
        assert _post(guarded, ALICE, LIST, session).status_code == 200
        assert _post(guarded, ALICE, CALL, session).status_code == 200
    assert Saga.objects.filter(kind="proxy_session").count() == 1
    assert [call["tool"] for call in guarded.calls()] == ["get_status"]


def test_stateless_clients_of_two_tenants_with_the_same_name_each_get_their_own_session(tmp_path: Path):
    with guarded_proxy("http", tmp_path) as guarded:

        async def scenario() -> list[bool]:
            answers = []
            for token in (ALICE, ALICE_OF_GLOBEX, ALICE):
                async with guarded.agent(token, mode="auto") as client:
                    answers.append((await client.call_tool("get_status", {})).is_error)
            return answers

        assert anyio.run(scenario) == [False, False, False]

    sessions = Saga.objects.filter(kind="proxy_session")
    assert sorted(sessions.values_list("tenant_id", flat=True)) == ["acme", "globex"]
    for session in sessions:
        assert session.metadata["proxy"]["era"] == "2026-07-28"
        assert session.steps.filter(status="COMPLETED").count() == (2 if session.tenant_id == "acme" else 1)
