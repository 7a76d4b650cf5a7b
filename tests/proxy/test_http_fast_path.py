"""The proxy's fast path over Streamable HTTP (sagas.protocols.proxy.http_fast), end to end: `semantic-saga serve`
with SAGA_PROXY_CONFIG in front of a downstream without the SDK that records what it receives
(tests/proxy/plain_server.py), driven in raw HTTP. A plain allowed call of a 2025-11-25 session is answered as one
JSON body (the SDK's app answers this endpoint with an event stream), relayed as the server sent it and journaled as
the SDK path journals it; every request the fast path must not take gets the SDK's own answer."""

from __future__ import annotations

import json
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from sagas.models import ProxyCallIntent, Saga, Step
from tests.protocols.conftest import ALICE, BOB, wait_healthy
from tests.proxy.harness import READY_SECONDS, ROOT, config_file, serve_command, stdio

PLAIN = Path(__file__).with_name("plain_server.py")
VERSION = "2025-11-25"
ACCEPT = "application/json, text/event-stream"
JSON, STREAM = "application/json", "text/event-stream"


@pytest.fixture(autouse=True)
def _committed_db(transactional_db: None) -> Iterator[None]:
    """The server is another process: it needs the migrated test database. It writes reads' lines behind their
    answers, so each test ends once its journal has settled: the database is emptied after it (a full run found the
    emptying deadlocked with a line being written)."""
    yield
    _journal_settled()


def _journal_settled(seconds: float = 30.0) -> None:
    """Until no step is EXECUTING, no intent waits, and the number of steps held still for half a second."""
    deadline, last, still_since = time.monotonic() + seconds, -1, time.monotonic()
    while time.monotonic() < deadline:
        count = Step.objects.count()
        busy = Step.objects.filter(status="EXECUTING").exists() or ProxyCallIntent.objects.exists()
        if count != last or busy:
            last, still_since = count, time.monotonic()
        elif time.monotonic() - still_since >= 0.5:
            return
        time.sleep(0.05)
    raise AssertionError(f"the proxy's journal did not settle within {seconds}s")


@dataclass
class Served:
    base: str
    proc: subprocess.Popen[bytes]
    record: Path

    @property
    def url(self) -> str:
        return f"{self.base}/proxy/mcp"


@pytest.fixture(scope="module")
def served(
    django_db_setup: None, django_db_blocker: object, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Served]:
    workdir = tmp_path_factory.mktemp("proxy-http-fast")
    record = workdir / "received.jsonl"
    config = config_file(workdir, {"plain": stdio(PLAIN, "--record", str(record))})
    command, env, port = serve_command(workdir, config)
    log = workdir / "serve.log"
    with log.open("ab") as out:
        proc = subprocess.Popen(command, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        wait_healthy(f"http://127.0.0.1:{port}", proc, log, READY_SECONDS)
        yield Served(f"http://127.0.0.1:{port}", proc, record)
    finally:
        proc.terminate()
        proc.wait(timeout=30)


class Session:
    """One 2025-11-25 session in raw HTTP, its handshake done."""

    def __init__(self, served: Served, token: str = ALICE, name: str = "raw-http-agent") -> None:
        self.url = served.url
        self.http = httpx.Client(headers={"Authorization": f"Bearer {token}", "Accept": ACCEPT}, timeout=30)
        opened = self.http.post(self.url, json=_initialize(name))
        assert opened.status_code == 200, opened.text
        self.id = opened.headers["mcp-session-id"]
        notified = self.post({"jsonrpc": "2.0", "method": "notifications/initialized"})
        assert notified.status_code == 202, notified.text

    def headers(self, **extra: str) -> dict[str, str]:
        return {"mcp-session-id": self.id, "mcp-protocol-version": VERSION, **extra}

    def post(self, body: Any, **headers: str) -> httpx.Response:
        return self.http.post(self.url, json=body, headers=self.headers(**headers))

    def call(self, request_id: int | str, tool: str, arguments: dict[str, Any], **headers: str) -> httpx.Response:
        return self.post(_call(request_id, tool, arguments), **headers)


def _initialize(name: str) -> dict[str, Any]:
    params = {"protocolVersion": VERSION, "capabilities": {}, "clientInfo": {"name": name, "version": "1.0"}}
    return {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": params}


def _call(request_id: int | str, tool: str, arguments: dict[str, Any], **params: Any) -> dict[str, Any]:
    body = {"name": tool, "arguments": arguments, **params}
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": body}


def _kind(answer: httpx.Response) -> str:
    return answer.headers.get("content-type", "").split(";")[0]


def _message(answer: httpx.Response) -> dict[str, Any]:
    """The JSON-RPC answer, from a JSON body or the last data line of an event stream."""
    if _kind(answer) == JSON:
        body: dict[str, Any] = answer.json()
        return body
    data = [line[len("data:") :].strip() for line in answer.text.splitlines() if line.startswith("data:")]
    event: dict[str, Any] = json.loads([d for d in data if d][-1])
    return event


def _calls_received(served: Served, name: str) -> list[dict[str, Any]]:
    received = [json.loads(line)["message"] for line in served.record.read_text().splitlines()]
    calls = [m for m in received if m.get("method") == "tools/call"]
    return [m for m in calls if (m["params"]["arguments"] or {}).get("name") == name]


def _finished_steps(saga_id: str, count: int) -> list[Step]:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        steps = list(Step.objects.filter(saga_id=saga_id).order_by("sequence"))
        if len(steps) >= count and all(step.status != "EXECUTING" for step in steps):
            return steps
        time.sleep(0.05)
    raise AssertionError(f"not {count} finished steps of {saga_id}")


def _session_saga(name: str) -> str:
    saga = Saga.objects.filter(metadata__proxy__client__name=name).values_list("id", flat=True).first()
    assert saga is not None, f"no session saga for the client {name}"
    return str(saga)


def test_a_plain_call_is_answered_as_one_json_body_relayed_as_sent_and_journaled(served: Served):
    session = Session(served, name="fast-http-journal")
    # The first call may come before the server handled the handshake's end (its notification answered 202 first).
    assert session.call(0, "lookup", {"key": "k-0"}).status_code == 200

    read = session.call(1, "lookup", {"key": "k-1"})
    write = session.call("two", "create_item", {"name": "fast-http-item"})

    assert (read.status_code, _kind(read), read.headers["mcp-session-id"]) == (200, JSON, session.id)
    assert read.json()["id"] == 1 and read.json()["result"]["x-served-by"] == "plain"  # as the server sent it
    assert _kind(write) == JSON and write.json()["id"] == "two"
    assert json.loads(write.json()["result"]["content"][0]["text"]) == {"created": "fast-http-item"}
    (sent,) = _calls_received(served, "fast-http-item")
    steps = _finished_steps(_session_saga("fast-http-journal"), 3)
    assert sorted((s.action, s.status) for s in steps) == [
        ("proxy.plain.create_item", "COMPLETED"),
        ("proxy.plain.lookup", "COMPLETED"),
        ("proxy.plain.lookup", "COMPLETED"),
    ]
    (write_step,) = [s for s in steps if s.action == "proxy.plain.create_item"]
    assert sent["params"]["_meta"]["io.semantic-saga/idempotency_key"] == str(write_step.id)


def test_what_the_fast_path_does_not_take_gets_the_sdks_event_stream(served: Served):
    session = Session(served, name="fast-http-declined")

    with_progress = session.post(_call(1, "lookup", {"key": "p"}, _meta={"progressToken": "t"}))
    listing = session.post({"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}})
    batch = session.post([_call(3, "lookup", {"key": "b"})])
    other_version = session.call(4, "lookup", {"key": "v"}, **{"mcp-protocol-version": "2025-06-18"})
    unknown = session.call(5, "no_such_tool", {})

    assert _kind(with_progress) == STREAM and "result" in _message(with_progress)
    assert _kind(listing) == STREAM and "tools" in _message(listing)["result"]
    assert _kind(batch) != JSON or "error" in _message(batch)  # whatever the SDK answers a batch, not the fast path
    assert _kind(other_version) == STREAM
    assert _kind(unknown) == STREAM and "error" in _message(unknown)


def test_a_session_is_never_answered_for_another_credential_or_after_it_ended(served: Served):
    session = Session(served, name="fast-http-owner")
    stranger = httpx.Client(headers={"Authorization": f"Bearer {BOB}", "Accept": ACCEPT}, timeout=30)

    hijacked = stranger.post(served.url, json=_call(1, "create_item", {"name": "hijack"}), headers=session.headers())
    ended = session.http.delete(served.url, headers=session.headers())
    after = session.call(2, "create_item", {"name": "after-end"})

    assert hijacked.status_code == 404 and _calls_received(served, "hijack") == []
    assert ended.status_code == 200
    assert after.status_code == 404 and _calls_received(served, "after-end") == []


def test_the_sdks_transport_checks_still_refuse_a_plain_call(served: Served):
    session = Session(served, name="fast-http-checks")

    foreign = session.call(1, "create_item", {"name": "foreign-origin"}, Origin="http://evil.example")
    json_only = session.call(2, "create_item", {"name": "json-only"}, Accept=JSON)
    no_session = session.http.post(served.url, json=_call(3, "create_item", {"name": "no-session"}))

    assert foreign.status_code == 403
    assert json_only.status_code == 406
    assert no_session.status_code == 400
    for name in ("foreign-origin", "json-only", "no-session"):
        assert _calls_received(served, name) == []


def test_a_cancelled_fast_call_is_withdrawn_and_answered_request_cancelled(served: Served):
    session = Session(served, name="fast-http-cancel")
    assert session.call(0, "lookup", {"key": "warm"}).status_code == 200  # the handshake's end handled
    answers: list[httpx.Response] = []
    waiting = threading.Thread(target=lambda: answers.append(session.call(7, "hang", {"name": "withdrawn"})))
    waiting.start()
    deadline = time.monotonic() + 30
    while not _calls_received(served, "withdrawn"):
        assert time.monotonic() < deadline, "the hanging call never reached the server"
        time.sleep(0.05)

    # its reason names a tools/call: an outside review found the fast path read the body's words, not its method
    cancel = {"requestId": 7, "reason": "the agent gave up on this tools/call"}
    cancelled = session.post({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": cancel})
    waiting.join(timeout=30)

    assert cancelled.status_code == 202
    (answer,) = answers
    assert _kind(answer) == JSON and answer.json()["error"]["code"] == -32800
    steps = _finished_steps(_session_saga("fast-http-cancel"), 2)
    (step,) = [s for s in steps if s.action == "proxy.plain.hang"]
    assert step.status == "FAILED" and step.uncertain_outcome  # sent, withdrawn: its effect is unknown
