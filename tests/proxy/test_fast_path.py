"""The stdio proxy's fast path (sagas.protocols.proxy.fast_calls), end to end: `semantic-saga proxy` driven in raw
JSON-RPC lines, in front of a downstream without the SDK that records every message it receives
(tests/proxy/plain_server.py). A plain allowed call is answered without the SDK's sessions (the downstream sees
the fast path's own ids), journaled exactly as the SDK path journals it, and relayed as the server sent it; every
frame the fast path does not take gets the SDK's answer, as before."""

from __future__ import annotations

import contextlib
import json
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.db import connection

from governance.models import KillSwitch
from sagas.models import Step
from tests.proxy.harness import stdio
from tests.proxy.plain_record import PLAIN, calls, finished_steps, plain_proxy, received
from tests.proxy.raw_agent import RawAgent

pytestmark = pytest.mark.django_db(transaction=True)
FAST_ID = "saga-fast-"


@pytest.fixture(autouse=True)
def _committed_db(transactional_db: None) -> None:
    """The proxy is another process: it checks the (migrated) test database before it starts."""


def _start(tmp_path: Path, *, fast: bool = True, **env: str) -> tuple[RawAgent, Path]:
    record = tmp_path / f"received-{time.monotonic_ns()}.jsonl"
    return plain_proxy(tmp_path, stdio(PLAIN, "--record", str(record)), fast=fast, **env), record


def _wait_until_sent(record: Path, name: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not any(c["params"]["arguments"].get("name") == name for c in calls(record)):
        assert time.monotonic() < deadline, f"the call of {name} never reached the server"
        time.sleep(0.05)


def _session(tmp_path: Path, fast: bool) -> dict[str, Any]:
    """A read, a write, a downstream error and an answer that is not a result; what came back and was journaled."""
    agent, record = _start(tmp_path, fast=fast)
    try:
        for n in (1, 2):  # the first call may arrive before the handshake's end reached the fast path
            agent.call(f"read-{n}", "lookup", {"key": f"k{n}"})
            agent.answer(f"read-{n}")
        agent.call("write", "create_item", {"name": "lamp"})
        agent.call("refused", "rpc_error", {"name": "x"})
        agent.call("bad", "bad_result", {"name": "x"})
        answers = {key: agent.answer(key) for key in ("read-2", "write", "refused", "bad")}
        steps = finished_steps(5)
    finally:
        agent.close()
    journaled = [
        {"action": s.action.split("@")[0], "status": s.status, "uncertain": s.uncertain_outcome, "id": str(s.id)}
        for s in steps
    ]
    return {"answers": answers, "steps": journaled, "calls": calls(record)}


def test_plain_calls_take_the_fast_path_and_are_answered_and_journaled_as_on_the_sdk_path(tmp_path: Path):
    fast = _session(tmp_path, fast=True)
    Step.objects.all().delete()
    slow = _session(tmp_path, fast=False)

    # The fast path sent its own ids downstream (the SDK's session sends integers), after the first call at most.
    fast_ids = [c["id"] for c in fast["calls"]]
    assert all(str(i).startswith(FAST_ID) for i in fast_ids[1:]), fast_ids
    assert not any(str(c["id"]).startswith(FAST_ID) for c in slow["calls"])
    # Each call carried its step's id as its idempotency key, on both paths.
    for session in (fast, slow):
        keys = [c["params"]["_meta"]["io.semantic-saga/idempotency_key"] for c in session["calls"]]
        assert sorted(keys) == sorted(step["id"] for step in session["steps"])  # the last three race each other

    # The same answers: the result as the server sent it (its extra field passed on, on the fast path)...
    read = fast["answers"]["read-2"]["result"]
    assert json.loads(read["content"][0]["text"]) == {"key": "k2", "found": True}
    assert read["x-served-by"] == "plain"
    # (the SDK's model writes isError: false where the server left it out, which means the same)
    assert {"isError": False, **fast["answers"]["write"]["result"]} == slow["answers"]["write"]["result"]
    # ...the server's JSON-RPC error passed on as it came...
    assert fast["answers"]["refused"]["error"] == slow["answers"]["refused"]["error"]
    assert fast["answers"]["refused"]["error"]["code"] == -32050
    # ...and an answer that is not a tools/call result is an error on both, never relayed as a result.
    assert "error" in fast["answers"]["bad"] and "result" not in fast["answers"]["bad"]
    assert "error" in slow["answers"]["bad"]

    # The same journal: actions, outcomes, nothing left uncertain.
    def summary(steps: list[dict[str, Any]]) -> list[tuple[str, str, bool]]:
        return sorted((step["action"], step["status"], step["uncertain"]) for step in steps)  # the last 3 raced

    assert summary(fast["steps"]) == summary(slow["steps"])
    assert [status for _, status, _ in summary(fast["steps"])] == [
        "FAILED",
        "COMPLETED",
        "COMPLETED",
        "COMPLETED",
        "FAILED",
    ]


def test_frames_the_fast_path_does_not_take_get_the_sdks_answers(tmp_path: Path):
    agent, record = _start(tmp_path)
    try:
        agent.send(b"{not json\n")  # the SDK's transport passes the parse error to its server, which goes on
        call = {"jsonrpc": "2.0", "id": "in-batch", "method": "tools/call", "params": {"name": "lookup"}}
        agent.send([call])
        agent.call("unknown", "no_such_tool", {})
        agent.call("not-args", "lookup", arguments=None, extra=1)
        agent.send(
            {
                "jsonrpc": "2.0",
                "id": "progress",
                "method": "tools/call",
                "params": {"name": "lookup", "arguments": {"key": "p"}, "_meta": {"progressToken": "t1"}},
            }
        )
        answers = {key: agent.answer(key) for key in ("unknown", "not-args", "progress")}
        # An id reused while its call is out goes to the SDK path; both are answered.
        agent.call(7, "slow", {"name": "first"})
        agent.call(7, "slow", {"name": "second"})
        sevens = agent.answers(7, 2)
    finally:
        agent.close()

    assert not any(m.get("id") == "in-batch" and "result" in m for m in agent.seen if isinstance(m, dict))
    assert answers["unknown"]["error"]["code"] == -32602 and "no_such_tool" in answers["unknown"]["error"]["message"]
    assert "result" in answers["not-args"]  # an extra params key: the SDK's server reads it as it always did
    assert json.loads(answers["progress"]["result"]["content"][0]["text"])["key"] == "p"
    sent = calls(record)
    by_name = {c["params"]["arguments"].get("key") or c["params"]["arguments"].get("name"): c["id"] for c in sent}
    assert not str(by_name["p"]).startswith(FAST_ID)  # progress needs the SDK's request context
    assert not str(by_name[None]).startswith(FAST_ID)  # the call with an extra params key
    assert str(by_name["first"]).startswith(FAST_ID) and not str(by_name["second"]).startswith(FAST_ID)
    assert len(sevens) == 2, (sevens, sent[-2:])


def test_a_fast_call_withdrawn_by_the_agent_is_cancelled_downstream_and_journaled_uncertain(tmp_path: Path):
    agent, record = _start(tmp_path)
    try:
        agent.call("warm", "lookup", {"key": "w"})
        agent.answer("warm")
        agent.call("hung", "hang", {"name": "job"})
        _wait_until_sent(record, "job")
        agent.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "hung"}})
        steps = finished_steps(2)
        agent.call("after", "lookup", {"key": "a"})
        agent.answer("after")
    finally:
        agent.close()

    hung = next(c for c in calls(record) if c["params"]["arguments"].get("name") == "job")
    cancelled = [m for m in received(record) if m.get("method") == "notifications/cancelled"]
    assert str(hung["id"]).startswith(FAST_ID) and cancelled[0]["params"]["requestId"] == hung["id"]
    assert not any(isinstance(m, dict) and m.get("id") == "hung" for m in agent.seen)  # no answer after a cancel
    assert steps[1].status == "FAILED" and steps[1].uncertain_outcome


def test_downstream_logs_reach_the_agent_and_an_oversized_answer_is_not_relayed(tmp_path: Path):
    agent, record = _start(tmp_path)
    try:
        agent.call("warm", "lookup", {"key": "w"})
        agent.answer("warm")
        agent.call("noisy", "noisy", {"name": "n"})
        noisy = agent.answer("noisy")
        agent.call("huge", "huge", {"kilobytes": 100})
        huge = agent.answer("huge")
        steps = finished_steps(3)
    finally:
        agent.close()

    logged = [m for m in agent.seen if isinstance(m, dict) and m.get("method") == "notifications/message"]
    assert logged and logged[0]["params"]["data"] == "working on n"
    assert json.loads(noisy["result"]["content"][0]["text"]) == {"noisy": True}
    assert (
        huge["result"]["isError"] is True and "more than this proxy passes on" in huge["result"]["content"][0]["text"]
    )
    assert str(calls(record)[-1]["id"]).startswith(FAST_ID)
    assert [s.status for s in steps] == ["COMPLETED", "COMPLETED", "FAILED"]


def test_a_read_the_quick_check_does_not_clear_is_refused_as_on_the_sdk_path(tmp_path: Path):
    agent, record = _start(tmp_path)
    try:
        agent.call("warm", "lookup", {"key": "w"})
        agent.answer("warm")
        steps = finished_steps(1)
        KillSwitch.objects.create(tenant_id=steps[0].saga.tenant_id, engaged_by="test", reason="stop everything")
        agent.call("stopped", "lookup", {"key": "s"})
        stopped = agent.answer("stopped")
        agent.call("write", "create_item", {"name": "nope"})
        refused = agent.answer("write")
    finally:
        agent.close()

    for answer in (stopped, refused):
        assert answer["result"]["isError"] is True
        assert "did NOT run" in answer["result"]["content"][0]["text"]
    assert [c["params"]["arguments"].get("key") for c in calls(record)] == ["w"]  # nothing else was sent


def test_answers_that_are_not_plain_json_text_are_never_relayed_broken(tmp_path: Path):
    """An outside review's finds: a lone surrogate, NaN and a block without its text from the server; a lone
    surrogate, NaN, deep nesting and the 2026-07-28 envelope from the agent."""
    agent, record = _start(tmp_path)
    try:
        agent.call("warm", "lookup", {"key": "w"})
        agent.answer("warm")
        agent.call("cut", "lone_surrogate", {"name": "x"})
        cut = agent.answer("cut")
        agent.call("nan", "not_a_number", {"name": "x"})
        nan = agent.answer("nan")
        agent.call("block", "bad_block", {"name": "x"})
        block = agent.answer("block")
        agent.call("listed", "listed_structure", {"name": "x"})
        listed = agent.answer("listed")
        agent.send(
            b'{"jsonrpc":"2.0","id":"x\\ud800","method":"tools/call","params":{"name":"create_item","arguments":{"name":"s"}}}\n'
        )
        agent.send(
            b'{"jsonrpc":"2.0","id":"nan-args","method":"tools/call","params":{"name":"lookup","arguments":{"key":NaN}}}\n'
        )
        agent.send(b'{"method":"tools/call","x":' + b"[" * 100_000 + b"]" * 100_000 + b"}\n")
        envelope = {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}
        agent.call("modern", "create_item", {"name": "m"}, _meta=envelope)
        modern = agent.answer("modern")
        agent.call("after", "lookup", {"key": "a"})  # the proxy is still there
        after = agent.answer("after")
        try:
            steps = finished_steps(6)  # warm, cut, nan, block, listed, after: nothing else ran
        except AssertionError:
            print(agent.stderr()[-5000:])
            raise
    finally:
        agent.close()

    # the half emoji: nothing relayed that the agent could not read, and its outcome is not claimed
    assert cut["result"]["isError"] is True and "may or may not have acted" in cut["result"]["content"][0]["text"]
    assert nan["result"]["structuredContent"] == {"v": None}  # NaN read as null, as the SDK path reads it
    assert block["error"]["code"] == -32603 and listed["error"]["code"] == -32603
    assert "error" in modern and "result" not in modern  # the SDK's refusal of a 2026-07-28 envelope
    assert json.loads(after["result"]["content"][0]["text"])["key"] == "a"
    sent = [c["params"]["arguments"] for c in calls(record)]
    assert {"name": "s"} not in sent and {"name": "m"} not in sent  # neither the surrogate id's call nor the envelope's
    by_action = {s.action.split("@")[0].rsplit(".", 1)[-1]: s for s in steps}
    assert by_action["lone_surrogate"].status == "FAILED" and by_action["lone_surrogate"].uncertain_outcome
    assert by_action["not_a_number"].status == "COMPLETED" and by_action["bad_block"].status == "FAILED"


def test_calls_out_when_the_agents_input_ends_are_answered_connection_closed(tmp_path: Path):
    agent, record = _start(tmp_path)
    agent.call("warm", "lookup", {"key": "w"})
    agent.answer("warm")
    agent.call("hung", "hang", {"name": "job"})
    _wait_until_sent(record, "job")
    assert agent.close() == 0
    closed = agent.answer("hung", timeout=10)
    assert closed["error"]["code"] == -32000
    steps = finished_steps(2)
    assert steps[1].status == "FAILED" and steps[1].uncertain_outcome


@pytest.mark.parametrize("fast", [True, False], ids=["fast path", "sdk path"])
def test_a_servers_own_error_is_its_answer_even_with_the_codes_the_session_uses_for_timeouts_and_closes(
    tmp_path: Path, fast: bool
):
    agent, _ = _start(tmp_path, fast=fast)
    try:
        for code in (-32000, -32001):
            agent.call(f"e{code}", "rpc_error", {"name": "x", "code": code})
        answers = [agent.answer(f"e{code}") for code in (-32000, -32001)]
        agent.call("after", "create_item", {"name": "still connected"})
        after = agent.answer("after")
        steps = finished_steps(3)
    finally:
        agent.close()

    assert [a["error"]["code"] for a in answers] == [-32000, -32001]  # passed on as the server's errors
    assert [(s.status, s.uncertain_outcome) for s in steps[:2]] == [("FAILED", False), ("FAILED", False)]
    assert "result" in after and steps[2].status == "COMPLETED"  # the server was not taken for gone


@contextlib.contextmanager
def _session_row_locked() -> Iterator[None]:
    """Another writer holding the session's row (PostgreSQL) or the database's write lock (SQLite) for the block:
    a call's begin waits for it."""
    params = connection.get_connection_params()
    if connection.vendor == "sqlite":
        other = sqlite3.connect(params["database"], uri=True, isolation_level=None)
        other.execute("BEGIN IMMEDIATE")
    else:
        import psycopg

        other = psycopg.connect(**{k: v for k, v in params.items() if k != "cursor_factory"})
        other.execute("SELECT id FROM sagas_saga FOR UPDATE")
    try:
        yield
    finally:
        other.rollback()
        other.close()


@pytest.mark.parametrize("fast", [True, False], ids=["fast path", "sdk path"])
def test_a_write_withdrawn_while_it_is_being_journaled_is_recorded_not_sent(tmp_path: Path, fast: bool):
    agent, record = _start(tmp_path, fast=fast)
    try:
        agent.call("warm", "create_item", {"name": "first"})
        agent.answer("warm")
        finished_steps(1)  # its outcome written: nothing queued that the next begin would wait for
        with _session_row_locked():
            agent.call("late", "create_item", {"name": "withdrawn"})
            time.sleep(1.0)  # its begin is waiting for the lock
            agent.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "late"}})
            time.sleep(0.5)
        steps = finished_steps(2)
    finally:
        agent.close()

    assert [c["params"]["arguments"]["name"] for c in calls(record)] == ["first"]  # never sent
    late = steps[1]
    assert late.status == "FAILED" and not late.uncertain_outcome
    assert late.error["sent"] is False and "went away before the call was sent" in late.error["message"]
