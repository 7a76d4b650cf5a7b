"""Approval from a channel the agent does not drive: the person at the agent's MCP client, asked by elicitation
(form mode), in both protocol eras with the official client's elicitation callback. Accept runs the held call,
decline refuses it, and the model-facing result says which; over stdio the client is asked by default, over HTTP
only when the gate rule says so."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import mcp.types as types
import pytest
from django.utils import timezone

from sagas.coordinator import sagas_recover
from sagas.models import Node
from tests.proxy.agent import MODES, text
from tests.proxy.guardian import ALICE, guarded_proxy, poll, stateless_call

pytestmark = pytest.mark.django_db(transaction=True)
ASK_THE_CLIENT = {"tools": [{"tool": "purge_cache", "action": "confirm", "approver": "both"}]}


class Person:
    """The user of the agent's client: sees the form, answers it."""

    def __init__(self, approve: bool | None) -> None:
        self.approve = approve
        self.forms: list[str] = []

    async def __call__(self, context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        self.forms.append(params.message)
        if self.approve is None:
            return types.ElicitResult(action="decline")
        return types.ElicitResult(action="accept", content={"approve": self.approve})


def _purge(transport: str, tmp_path: Path, mode: str, person: Person, **config: Any) -> Any:
    with guarded_proxy(transport, tmp_path, **config) as guarded:

        async def scenario() -> Any:
            async with guarded.agent(ALICE, mode=mode, elicitation_callback=person) as client:
                return await client.call_tool("purge_cache", {"scope": "all"})

        return anyio.run(scenario), guarded.calls()


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_the_person_at_the_client_approves_and_the_call_runs(transport: str, mode: str, tmp_path: Path):
    person = Person(approve=True)
    policy = ASK_THE_CLIENT if transport == "http" else {}
    answer, calls = _purge(transport, tmp_path, mode, person, policy=policy)

    assert not answer.is_error and '"ran": "purge_cache"' in text(answer)
    assert [call["tool"] for call in calls] == ["purge_cache"]
    # the form said what would run, where, its class and what undo could do
    assert len(person.forms) == 1 and '"purge_cache" on the MCP server "h"' in person.forms[0]
    assert "Class I: irreversible" in person.forms[0] and '  scope: "all"' in person.forms[0]
    approval = Node.objects.get().approvals.get()
    assert approval.status == "APPROVED" and approval.decided_by.startswith("client:")
    # 2025-11-25 asks on the held request's stream; 2026-07-28 answers input_required and the client comes back
    assert approval.snapshot["proxy"]["held_as"] == ("request" if mode == "legacy" else "elicited")


@pytest.mark.parametrize("mode", MODES)
def test_the_person_at_the_client_declines_and_nothing_runs(mode: str, tmp_path: Path):
    answer, calls = _purge("stdio", tmp_path, mode, Person(approve=None))

    assert answer.is_error and "the person at the agent's client declined it" in text(answer)
    assert "did NOT run" in text(answer) and calls == []
    assert Node.objects.get().step.error["code"] == "CONFIRM_DENIED"


def test_over_http_the_client_is_not_asked_unless_a_rule_says_so(tmp_path: Path):
    person = Person(approve=True)
    answer, calls = _purge("http", tmp_path, "legacy", person, policy={"confirmTimeoutMs": 1500})

    assert person.forms == [] and answer.is_error and calls == []
    assert "nobody approved it within the confirm timeout" in text(answer)


def test_a_client_that_never_comes_back_with_its_answer_leaves_nothing_waiting(tmp_path: Path):
    policy = {**ASK_THE_CLIENT, "confirmTimeoutMs": 1000}
    with guarded_proxy("http", tmp_path, policy=policy) as guarded:
        asks = {"elicitation": {"form": {}}}
        first = stateless_call(guarded.url, ALICE, "purge_cache", {"scope": "all"}, asks)
        node = poll(lambda: Node.objects.filter(approvals__expires_at__lt=timezone.now()).first(), "the timeout")
        swept = sagas_recover()

    # the call was answered input_required with the form, and the client never came back with an answer
    assert first["resultType"] == "input_required" and "approval" in first["inputRequests"]
    assert swept.held_calls_withdrawn == 1 and guarded.calls() == []
    node.refresh_from_db()
    assert node.status == "REJECTED" and node.step.status == "REFUSED"
    assert node.step.error["code"] == "CONFIRM_TIMEOUT" and node.approvals.get().status == "EXPIRED"


def test_a_replayed_answer_never_sends_the_call_twice_and_says_what_happened(tmp_path: Path):
    asks = {"elicitation": {"form": {}}}
    with guarded_proxy("http", tmp_path, policy=ASK_THE_CLIENT) as guarded:
        first = stateless_call(guarded.url, ALICE, "purge_cache", {"scope": "all"}, asks)
        answer = {"approval": {"action": "accept", "content": {"approve": True}}}
        retry = {"inputResponses": answer, "requestState": first["requestState"]}

        async def replays() -> list[dict[str, Any]]:
            results: list[dict[str, Any]] = []
            async with anyio.create_task_group() as group:
                for _ in range(4):  # the same retry, four times at once

                    async def send() -> None:
                        sent = await anyio.to_thread.run_sync(
                            lambda: stateless_call(guarded.url, ALICE, "purge_cache", {"scope": "all"}, asks, **retry)
                        )
                        results.append(sent)

                    group.start_soon(send)
            return results

        concurrent = anyio.run(replays)
        later = stateless_call(guarded.url, ALICE, "purge_cache", {"scope": "all"}, asks, **retry)

    assert [call["tool"] for call in guarded.calls()] == ["purge_cache"]  # sent once, whatever the replays
    ran = [r for r in concurrent if not r.get("isError")]
    assert len(ran) == 1 and '"ran": "purge_cache"' in ran[0]["content"][0]["text"]
    for replayed in [*(r for r in concurrent if r.get("isError")), later]:
        assert "already sent by an earlier request" in replayed["content"][0]["text"]
