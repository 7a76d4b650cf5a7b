"""A2A fed hostile messages over JSON-RPC against a real `semantic-saga serve` (issue 20, item 3): every operation's
command with hostile fields, malformed message shapes (no parts, several, text, non-object data, odd roles, long
context ids, unknown task ids, bulky metadata) and arbitrary params. Every answer is JSON, never a 5xx or a
traceback. A JSON-RPC error names what was wrong and writes no row; a refused command is a REJECTED task (how A2A
answers a refusal) that changes no saga row; no command ever ends FAILED (that is an unexpected error); no answer
carries anything of the other tenant's saga.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sagas.models import A2ATask
from sagas.operations.table import A2A_OPERATIONS
from tests.fuzz.conftest import Seeded, rows
from tests.fuzz.hostile import FUZZ, assert_no_traceback, assert_nothing_of_outsider, hostile, json_values
from tests.protocols.conftest import ALICE, RunningServer

HEADERS = {"Content-Type": "application/json", "A2A-Version": "1.0", "Authorization": f"Bearer {ALICE}"}
VERBS = sorted(A2A_OPERATIONS)
# Twenty operations, each a task written per accepted command: fewer examples each than the MCP tools get keeps
# the suite's time in CI small (SAGA_FUZZ_EXAMPLES still scales it).
A2A_FUZZ = settings(FUZZ, max_examples=max(5, FUZZ.max_examples * 2 // 5))


def commands(verb: str, seeded: Seeded) -> st.SearchStrategy[dict[str, Any]]:
    names = list(A2A_OPERATIONS[verb].arguments.model_json_schema().get("properties", {}))
    values = hostile([*seeded.outsider_ids, "w"])
    fields = st.dictionaries(st.sampled_from(names), values, max_size=len(names)) if names else st.just({})
    outsider = st.just({"saga_id": seeded.outsider_saga, "node_id": seeded.outsider_node})
    return st.one_of(fields, outsider).map(lambda body: {"operation": verb, **body})


def parts(command: st.SearchStrategy[dict[str, Any]]) -> st.SearchStrategy[list[dict[str, Any]]]:
    data = command.map(lambda body: {"data": body})
    odd = st.one_of(
        st.builds(lambda text: {"text": text}, st.text(max_size=50)),
        st.builds(lambda value: {"data": value}, json_values),
        st.builds(lambda body, media: {"data": body, "mediaType": media}, command, st.sampled_from(["text/plain", ""])),
        st.dictionaries(st.text(max_size=8), json_values, max_size=3),
    )
    return st.one_of(st.lists(data, min_size=1, max_size=1), st.lists(st.one_of(data, odd), max_size=3))


def messages(verb: str, seeded: Seeded) -> st.SearchStrategy[dict[str, Any]]:
    optional = {
        "contextId": st.one_of(st.text(max_size=20), st.just("c" * 300)),
        "taskId": st.sampled_from([str(uuid.uuid4()), seeded.outsider_saga, ""]),
        "metadata": st.one_of(
            st.dictionaries(st.text(max_size=8), json_values, max_size=3), st.just({"x": "y" * 20000})
        ),
    }
    roles = st.sampled_from(["ROLE_USER", "ROLE_USER", "ROLE_AGENT", "ROLE_UNSPECIFIED", "nobody", 7])
    required = {"messageId": st.one_of(st.just("m1"), st.text(max_size=10)), "role": roles}
    return st.fixed_dictionaries({**required, "parts": parts(commands(verb, seeded))}, optional=optional)


def _post(server: RunningServer, params: Any) -> httpx.Response:
    body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": params}
    return httpx.post(f"{server.base}/a2a", json=body, headers=HEADERS, timeout=60)


def _check(sent: Any, answer: httpx.Response, before: dict[str, int], seeded: Seeded) -> None:
    what = f"SendMessage({json.dumps(sent, default=str)[:300]})"
    assert answer.status_code < 500, f"{what}: HTTP {answer.status_code} {answer.text[:500]}"
    assert_no_traceback(answer.text, what)
    assert_nothing_of_outsider(answer.text, json.dumps(sent, default=str), seeded.outsider_ids, what)
    reply = answer.json()
    after = rows()
    if "error" in reply:
        assert reply["error"].get("message"), f"{what}: a JSON-RPC error without a message"
        assert after == before, f"{what} was refused but wrote rows"
        return
    state = reply["result"].get("task", {}).get("status", {}).get("state")
    assert state != "TASK_STATE_FAILED", f"{what}: ended FAILED (an unexpected error): {answer.text[:800]}"
    if state == "TASK_STATE_REJECTED":  # the refusal is the task: nothing else changed
        assert {k: v for k, v in after.items() if k != A2ATask.__name__} == {
            k: v for k, v in before.items() if k != A2ATask.__name__
        }, f"{what} was rejected but changed saga rows"


@pytest.mark.parametrize("verb", VERBS)
def test_every_a2a_command_refuses_hostile_messages_clearly(verb: str, server: RunningServer, seeded: Seeded) -> None:
    @A2A_FUZZ
    @given(message=messages(verb, seeded))
    def fuzz(message: dict[str, Any]) -> None:
        before = rows()
        _check(message, _post(server, {"message": message}), before, seeded)

    fuzz()


def test_arbitrary_send_message_params_are_refused_clearly(server: RunningServer, seeded: Seeded) -> None:
    @FUZZ
    @given(params=json_values)
    def fuzz(params: Any) -> None:
        before = rows()
        _check(params, _post(server, params), before, seeded)

    fuzz()
