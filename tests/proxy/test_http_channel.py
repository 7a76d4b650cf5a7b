"""The fast path's way down over Streamable HTTP (sagas.protocols.proxy.http_channel), end to end: `semantic-saga
proxy` driven in raw JSON-RPC lines, in front of the plain server (tests/proxy/plain_server.py) served over HTTP,
which records every message it receives and answers a call with one JSON body, or with an event stream when it
sends something first. A plain allowed call is POSTed by the proxy itself under its own id, answered and journaled as
the SDK's session path answers and journals it; what the server sends during the call reaches the agent."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sagas.models import Step
from tests.distributed.workers import free_port
from tests.proxy.harness import ROOT, wait_for_port
from tests.proxy.plain_record import PLAIN, calls, finished_steps, plain_proxy, received
from tests.proxy.raw_agent import RawAgent

pytestmark = pytest.mark.django_db(transaction=True)
FAST_ID = "saga-fast-"


@pytest.fixture(autouse=True)
def _committed_db(transactional_db: None) -> None:
    """The proxy is another process: it checks the (migrated) test database before it starts."""


@contextlib.contextmanager
def _proxied(tmp_path: Path, *, fast: bool = True) -> Iterator[tuple[RawAgent, Path]]:
    """The plain server over HTTP, and `semantic-saga proxy` in front of it with the agent's handshake done."""
    record = tmp_path / f"received-{time.monotonic_ns()}.jsonl"
    port = free_port()
    server = subprocess.Popen([sys.executable, str(PLAIN), "--record", str(record), "--http-port", str(port)], cwd=ROOT)
    agent: RawAgent | None = None
    try:
        wait_for_port(port, server)
        agent = plain_proxy(tmp_path, {"url": f"http://127.0.0.1:{port}/mcp", "trust": "first-use"}, fast=fast)
        yield agent, record
    finally:
        if agent is not None:
            agent.close()
        server.kill()  # uvicorn would wait for the hanging call's request to end
        server.wait(timeout=30)


def _session(tmp_path: Path, fast: bool) -> dict[str, Any]:
    with _proxied(tmp_path, fast=fast) as (agent, record):
        for n in (1, 2):  # the first call may arrive before the handshake's end reached the fast path
            agent.call(f"read-{n}", "lookup", {"key": f"k{n}"})
            agent.answer(f"read-{n}")
        agent.call("write", "create_item", {"name": "lamp"})
        agent.call("refused", "rpc_error", {"name": "x"})
        agent.call("noisy", "noisy", {"name": "n"})
        answers = {key: agent.answer(key) for key in ("read-2", "write", "refused", "noisy")}
        steps = finished_steps(5)
        logged = [m for m in agent.seen if isinstance(m, dict) and m.get("method") == "notifications/message"]
    journaled = sorted((s.action.split("@")[0], s.status, s.uncertain_outcome) for s in steps)
    return {"answers": answers, "steps": journaled, "calls": calls(record), "logged": logged, "ids": steps}


def test_plain_calls_go_down_over_http_on_the_proxys_own_post_answered_and_journaled_as_through_the_session(
    tmp_path: Path,
):
    fast = _session(tmp_path, fast=True)
    Step.objects.all().delete()
    slow = _session(tmp_path, fast=False)

    fast_ids = [c["id"] for c in fast["calls"]]
    assert all(str(i).startswith(FAST_ID) for i in fast_ids[1:]), fast_ids
    assert not any(str(c["id"]).startswith(FAST_ID) for c in slow["calls"])
    keys = sorted(c["params"]["_meta"]["io.semantic-saga/idempotency_key"] for c in fast["calls"])
    assert keys == sorted(str(step.id) for step in fast["ids"])
    read = fast["answers"]["read-2"]["result"]
    assert read["x-served-by"] == "plain"  # relayed as the server sent it (a JSON body)
    assert {"isError": False, **fast["answers"]["write"]["result"]} == slow["answers"]["write"]["result"]
    assert fast["answers"]["refused"]["error"] == slow["answers"]["refused"]["error"]
    # the log line the server sent on the call's event stream, before its answer, reached the agent on both paths
    for session in (fast, slow):
        assert [m["params"]["data"] for m in session["logged"]] == ["working on n"]
        assert json.loads(session["answers"]["noisy"]["result"]["content"][0]["text"]) == {"noisy": True}
    assert fast["steps"] == slow["steps"]


def test_an_http_fast_call_withdrawn_by_the_agent_is_cancelled_downstream_and_journaled_uncertain(tmp_path: Path):
    with _proxied(tmp_path) as (agent, record):
        agent.call("warm", "lookup", {"key": "w"})
        agent.answer("warm")
        agent.call("hung", "hang", {"name": "job"})
        deadline = time.monotonic() + 30
        while len(calls(record)) < 2:
            assert time.monotonic() < deadline, "the hanging call never reached the server"
            time.sleep(0.05)
        agent.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "hung"}})
        agent.call("after", "lookup", {"key": "a"})
        agent.answer("after")
        steps = finished_steps(3)
        arrived = received(record)

    hung = calls(record)[1]
    cancelled = [m for m in arrived if m.get("method") == "notifications/cancelled"]
    assert str(hung["id"]).startswith(FAST_ID) and cancelled[0]["params"]["requestId"] == hung["id"]
    assert not any(isinstance(m, dict) and m.get("id") == "hung" for m in agent.seen)
    (step,) = [s for s in steps if str(s.id) == hung["params"]["_meta"]["io.semantic-saga/idempotency_key"]]
    assert step.status == "FAILED" and step.uncertain_outcome  # sent, withdrawn: its effect is unknown


def test_http_answers_past_the_limit_or_not_plain_text_are_never_relayed(tmp_path: Path):
    with _proxied(tmp_path) as (agent, _record):
        agent.call("warm", "lookup", {"key": "w"})
        agent.answer("warm")
        agent.call("huge", "huge", {"kilobytes": 100})
        huge = agent.answer("huge")
        agent.call("cut", "lone_surrogate", {"name": "x"})
        cut = agent.answer("cut")
        agent.call("nan", "not_a_number", {"name": "x"})
        nan = agent.answer("nan")
        steps = finished_steps(4)

    assert (
        huge["result"]["isError"] is True and "more than this proxy passes on" in huge["result"]["content"][0]["text"]
    )
    assert cut["result"]["isError"] is True and "may or may not have acted" in cut["result"]["content"][0]["text"]
    assert nan["result"]["structuredContent"] == {"v": None}
    # the oversized answer and the unreadable one: sent, and what they did is not known
    assert [(s.status, s.uncertain_outcome) for s in steps] == [
        ("COMPLETED", False),
        ("FAILED", True),
        ("FAILED", True),
        ("COMPLETED", False),
    ]


def test_an_http_answer_to_another_id_leaves_the_calls_outcome_unknown(tmp_path: Path):
    # An outside review's find: the server received the call and may have acted, whatever it answered.
    with _proxied(tmp_path) as (agent, _record):
        agent.call("warm", "lookup", {"key": "w"})
        agent.answer("warm")
        agent.call("stray", "other_id", {"name": "x"})
        stray = agent.answer("stray")
        steps = finished_steps(2)

    assert stray["result"]["isError"] is True and "may or may not have acted" in stray["result"]["content"][0]["text"]
    assert (steps[1].status, steps[1].uncertain_outcome) == ("FAILED", True)
