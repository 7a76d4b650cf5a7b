"""The stdio proxy stopping cleanly (the agent's input ends, or SIGTERM) while writes are still being journaled, and
calls whose arguments the journal cannot store: nothing is left EXECUTING for the recovery sweep to call uncertain,
nothing unstorable reaches the database, and the agent is told in words it can act on. Both paths (the fast path and
the SDK's sessions), against the recording downstream of tests/proxy/plain_server.py."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from sagas.models import Step
from tests.proxy.plain_record import calls, finished_steps
from tests.proxy.test_fast_path import _session_row_locked, _start

pytestmark = pytest.mark.django_db(transaction=True)
PATHS = pytest.mark.parametrize("fast", [True, False], ids=["fast path", "sdk path"])


@pytest.fixture(autouse=True)
def _committed_db(transactional_db: None) -> None:
    """The proxy is another process: it checks the (migrated) test database before it starts."""


@PATHS
@pytest.mark.parametrize("stop", ["input ends", "sigterm"])
def test_writes_being_journaled_when_the_proxy_stops_are_recorded_not_sent(tmp_path: Path, fast: bool, stop: str):
    agent, record = _start(tmp_path, fast=fast)
    agent.call("warm", "create_item", {"name": "first"})
    agent.answer("warm")
    finished_steps(1)
    with _session_row_locked():
        for n in range(6):  # more than the journal's threads: some wait for the lock, some in its queue
            agent.call(f"late{n}", "create_item", {"name": f"late{n}"})
        time.sleep(1.0)  # their begins wait for the lock
        assert agent.process.stdin is not None
        if stop == "sigterm":
            agent.process.terminate()
        else:
            agent.process.stdin.close()
        time.sleep(0.5)  # the proxy is stopping while they wait
    exit_code = agent.process.wait(60)

    assert exit_code == 0
    assert [c["params"]["arguments"]["name"] for c in calls(record)] == ["first"]  # none of the others was sent
    steps = list(Step.objects.order_by("sequence"))
    assert [s.status for s in steps[1:]] == ["FAILED"] * (len(steps) - 1)  # none left EXECUTING
    assert all(s.error["sent"] is False and not s.uncertain_outcome for s in steps[1:])
    assert "journal is closed" not in agent.stderr()


@PATHS
def test_arguments_the_journal_cannot_store_are_refused_before_anything_is_written(tmp_path: Path, fast: bool):
    agent, record = _start(tmp_path, fast=fast)
    try:
        agent.call("nul", "create_item", {"name": "a\u0000b"})
        nul = agent.answer("nul")
        raw = b'{"jsonrpc": "2.0", "id": "nan", "method": "tools/call", "params": '
        agent.send(raw + b'{"name": "create_item", "arguments": {"name": "n", "size": NaN}}}\n')
        nan = agent.answer("nan")
        agent.call("after", "create_item", {"name": "fine"})
        after = agent.answer("after")
        steps = finished_steps(1)
    finally:
        agent.close()

    for answer, problem in ((nul, "arguments.name contains a NUL character"), (nan, "arguments.size is nan")):
        text = answer["result"]["content"][0]["text"]
        assert answer["result"]["isError"] is True
        assert problem in text and "was not sent" in text and "Fix the arguments" in text
        assert "proxy_call_begin" not in text  # the agent's words, not an operation's name
    assert "result" in after and not after["result"].get("isError")
    assert [c["params"]["arguments"]["name"] for c in calls(record)] == ["fine"]
    assert [s.input for s in steps] == [{"name": "fine"}]
