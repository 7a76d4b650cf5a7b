"""Shared connections (registry.actions.mcp.shared_connections, sagas.executor.shared_connections): inside a scope
the calls of one thread to one downstream server reuse one connection, and a failure is reported exactly as on a
fresh connection, then replaced by a new one for the next call. The server (tests/mcp_actions/pid_server.py) writes
its PID to a file each time it starts, so the tests count starts."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from registry.actions import invoke_forward
from registry.actions.mcp import shared_connections
from registry.errors import ActionFailure
from sagas import executor
from tests.distributed.workers import free_port
from tests.mcp_actions.conftest import context, http_server, mcp_contract

SERVER = Path(__file__).with_name("pid_server.py")
STDERR_LINE = "pid_server: exiting on request"


def _stdio(pid_file: Path, *extra: str) -> dict[str, Any]:
    return {"transport": "stdio", "command": sys.executable, "args": [str(SERVER), "--pid-file", str(pid_file), *extra]}


def _echo(server: dict[str, Any], **forward: Any) -> dict[str, Any]:
    return mcp_contract("echo", server, {"tool": "echo", "arguments": {"text": "${input.text}"}, **forward})


def _call(contract: dict[str, Any], text: str = "hi") -> dict[str, Any]:
    answer: dict[str, Any] = invoke_forward(contract, context(text=text))["result"]
    return answer


def _failure(contract: dict[str, Any]) -> ActionFailure:
    with pytest.raises(ActionFailure) as caught:
        invoke_forward(contract, context(text="hi"))
    return caught.value


def _starts(pid_file: Path) -> list[int]:
    return [int(line) for line in pid_file.read_text().split()] if pid_file.exists() else []


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _wait_dead(pid: int) -> None:
    deadline = time.monotonic() + 30
    while _alive(pid):
        assert time.monotonic() < deadline, f"process {pid} is still running"
        time.sleep(0.05)


def test_calls_inside_one_scope_start_the_stdio_server_once_and_the_scope_stops_it(tmp_path: Path):
    # given a stdio server
    pid_file = tmp_path / "started"
    contract = _echo(_stdio(pid_file))
    # when five calls run inside one scope
    with shared_connections():
        answers = [_call(contract, f"call {n}") for n in range(5)]
        running = _alive(answers[0]["pid"])
    # then the server started once, answered every call, and was stopped when the scope ended
    assert len(_starts(pid_file)) == 1
    assert [answer["text"] for answer in answers] == [f"call {n}" for n in range(5)]
    assert {answer["pid"] for answer in answers} == set(_starts(pid_file))
    assert running and not _alive(answers[0]["pid"])


def test_calls_outside_a_scope_start_the_stdio_server_each_time(tmp_path: Path):
    pid_file = tmp_path / "started"
    contract = _echo(_stdio(pid_file))
    answers = [_call(contract) for _ in range(3)]
    assert len(_starts(pid_file)) == 3
    assert len({answer["pid"] for answer in answers}) == 3


def test_server_dying_mid_call_fails_that_call_as_on_a_fresh_connection_and_the_next_call_reconnects(tmp_path: Path):
    # given a server that ends its process while answering exit_now
    pid_file = tmp_path / "started"
    server = _stdio(pid_file)
    dying = mcp_contract("exit_now", server, {"tool": "exit_now"})
    fresh = _failure(dying)
    # when it dies mid-call inside a scope, after serving a call
    with shared_connections():
        first = _call(_echo(server))
        shared = _failure(dying)
        after = _call(_echo(server))
    # then the call failed as it does on a connection of its own: sent, so uncertain, quoting the server's stderr
    assert (shared.code, shared.uncertain, shared.retryable) == (fresh.code, fresh.uncertain, fresh.retryable)
    assert (shared.code, shared.uncertain) == ("MCP_TRANSPORT_ERROR", True)
    assert STDERR_LINE in shared.message and STDERR_LINE in fresh.message
    # and the next call started a new server
    assert first["pid"] != after["pid"]
    assert _starts(pid_file)[1:] == [first["pid"], after["pid"]]


def test_server_dying_during_the_capture_read_fails_certain_and_the_next_call_reconnects(tmp_path: Path):
    # given a call whose capture read kills the server: the forward tool is never sent
    pid_file = tmp_path / "started"
    server = _stdio(pid_file)
    contract = _echo(server)
    contract["capture"] = {"tool": "exit_now", "arguments": {}}
    fresh = _failure(contract)
    # when
    with shared_connections():
        first = _call(_echo(server))
        shared = _failure(contract)
        after = _call(_echo(server))
    # then nothing was sent, in the scope as outside it
    assert (shared.code, shared.uncertain, shared.retryable) == ("MCP_NOT_SENT", False, True)
    assert (fresh.code, fresh.uncertain, fresh.retryable) == ("MCP_NOT_SENT", False, True)
    assert first["pid"] != after["pid"]


def test_server_that_cannot_start_fails_as_on_a_fresh_connection_and_nothing_is_kept(tmp_path: Path):
    missing = _echo({"transport": "stdio", "command": str(tmp_path / "no-such-server")})
    fresh = _failure(missing)
    with shared_connections():
        shared = [_failure(missing) for _ in range(2)]  # the second tries again: no broken session is kept
    assert [(failure.code, failure.uncertain) for failure in shared] == [("MCP_SERVER_START_FAILED", False)] * 2
    assert (fresh.code, fresh.message) == (shared[0].code, shared[0].message)


def test_server_killed_between_calls_is_replaced_before_the_next_call_is_sent(tmp_path: Path):
    # given a scope whose server is killed after answering
    pid_file = tmp_path / "started"
    contract = _echo(_stdio(pid_file))
    with shared_connections():
        first = _call(contract)
        os.kill(first["pid"], signal.SIGKILL)
        _wait_dead(first["pid"])
        time.sleep(0.2)  # the connection's reader sees the end of the server's output
        # when the next call runs
        after = _call(contract)
    # then it did not fail: a new server was started before the call was sent
    assert after["pid"] != first["pid"] and _starts(pid_file) == [first["pid"], after["pid"]]


def test_timeout_fails_that_call_as_uncertain_and_stops_the_hung_server(tmp_path: Path):
    pid_file = tmp_path / "started"
    server = _stdio(pid_file)
    hang = mcp_contract("hang", server, {"tool": "hang", "timeout_seconds": 1})
    with shared_connections():
        first = _call(_echo(server))
        failure = _failure(hang)
        stopped = not _alive(first["pid"])
        after = _call(_echo(server))
    assert (failure.code, failure.uncertain) == ("MCP_TIMEOUT", True)
    assert "no answer within 1s" in failure.message
    assert stopped and after["pid"] != first["pid"]


def test_nested_scope_reuses_the_outer_connections(tmp_path: Path):
    pid_file = tmp_path / "started"
    contract = _echo(_stdio(pid_file))
    with shared_connections():
        outer = _call(contract)
        with shared_connections():
            inner = _call(contract)
        still_running = _alive(outer["pid"])
        last = _call(contract)
    assert outer["pid"] == inner["pid"] == last["pid"] and still_running
    assert len(_starts(pid_file)) == 1 and not _alive(outer["pid"])


def test_calls_from_another_thread_get_a_connection_of_their_own(tmp_path: Path):
    pid_file = tmp_path / "started"
    contract = _echo(_stdio(pid_file))
    elsewhere: list[dict[str, Any]] = []
    with shared_connections():
        mine = _call(contract)
        thread = threading.Thread(target=lambda: elsewhere.extend(_call(contract) for _ in range(2)))
        thread.start()
        thread.join()
        again = _call(contract)
    assert mine["pid"] == again["pid"]
    assert len({answer["pid"] for answer in elsewhere} | {mine["pid"]}) == 3 and len(_starts(pid_file)) == 3


def test_scope_stops_its_servers_when_the_body_raises(tmp_path: Path):
    pid_file = tmp_path / "started"
    contract = _echo(_stdio(pid_file))
    with pytest.raises(RuntimeError, match="the walk broke"), shared_connections():
        pid = _call(contract)["pid"]
        raise RuntimeError("the walk broke")
    assert not _alive(pid)


def test_closing_the_scope_ends_a_stuck_server(tmp_path: Path):
    # given a server that ignores both its stdin closing and SIGTERM
    pid_file = tmp_path / "started"
    contract = _echo(_stdio(pid_file, "--linger"))
    pids: list[int] = []

    def run() -> None:
        with shared_connections():
            pids.append(_call(contract)["pid"])

    # when the scope ends (in a thread, so a hang fails the test instead of stalling it)
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(timeout=60)
    # then the close finished and the server is gone
    assert not thread.is_alive(), "closing the scope hung"
    assert len(pids) == 1 and not _alive(pids[0])


def test_executor_scope_shares_mcp_connections_for_perform(tmp_path: Path):
    # given the executor's scope (what the undo walk opens) around two performs
    pid_file = tmp_path / "started"
    contract = _echo(_stdio(pid_file))
    with executor.shared_connections():
        outcomes = [executor.perform(contract, context(text="hi"), compensation=False) for _ in range(2)]
        with executor.shared_connections():
            outcomes.append(executor.perform(contract, context(text="hi"), compensation=False))
    # then one server served all three calls, and it was stopped with the scope
    assert all(outcome.ok for outcome in outcomes)
    pids = {outcome.result["result"]["pid"] for outcome in outcomes}
    assert len(pids) == 1 and _starts(pid_file) == list(pids) and not _alive(pids.pop())


@contextlib.contextmanager
def _http_pid_server(pid_file: Path) -> Iterator[str]:
    port = free_port()
    args = [sys.executable, str(SERVER), "--pid-file", str(pid_file), "--http", "--port", str(port)]
    process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while True:
            with socket.socket() as sock:
                if sock.connect_ex(("127.0.0.1", port)) == 0:
                    break
            assert process.poll() is None and time.monotonic() < deadline, "the HTTP pid server did not start"
            time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        process.wait(timeout=30)


def test_http_calls_inside_one_scope_share_one_connection(tmp_path: Path):
    with _http_pid_server(tmp_path / "started") as url:
        contract = _echo(http_server(url))
        with shared_connections():
            shared = [_call(contract)["peer"] for _ in range(3)]
        fresh = [_call(contract)["peer"] for _ in range(3)]
    # the scope's calls came over one TCP connection; calls outside a scope open one each
    assert len(set(shared)) == 1
    assert len(set(fresh)) == 3 and not set(fresh) & set(shared)
