"""Hostile HTTP requests to /mcp and /api/v1 of a real `semantic-saga serve` (issue 20, item 3): foreign Host and
Origin headers, wrong content types, Content-Length lies, oversize and deeply nested bodies. Each is answered with a
4xx that says what was wrong, never a 5xx or a traceback, and writes no row."""

from __future__ import annotations

import json
import socket
from typing import Any

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.fuzz.conftest import Seeded, rows
from tests.fuzz.hostile import FUZZ, assert_no_traceback, assert_nothing_of_outsider
from tests.protocols.conftest import ALICE, RunningServer

MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
LIMIT = 1024 * 1024


def _begin(arguments: Any) -> bytes:
    call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "begin_saga", "arguments": arguments}}
    return json.dumps(call).encode()


def _deep(kind: str, depth: int) -> str:
    # Written as text: json.dumps itself stops at Python's recursion limit.
    opening, closing = ('{"a":', "}") if kind == "object" else ("[", "]")
    return opening * depth + "1" + closing * depth


def _body(target: str, metadata_json: str) -> bytes:
    if target == "/mcp":
        return _begin({"metadata": "@"}).replace(b'"@"', metadata_json.encode())
    return f'{{"metadata": {metadata_json}}}'.encode()


def _raw(server: RunningServer, head: str, body: bytes) -> tuple[int, str]:
    """Send bytes as they are (httpx corrects a false Content-Length); the status and the answer's text."""
    port = int(server.base.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(head.encode() + b"\r\n" + body)
        sock.shutdown(socket.SHUT_WR)
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    answer = b"".join(chunks).decode("utf-8", "replace")
    # 0: the server closed the connection without an answer (it was still waiting for the body when we hung up).
    return (int(answer.split(" ", 2)[1]) if answer else 0), answer


def _assert_clear_refusal(status: int, text: str, what: str) -> None:
    assert 400 <= status < 500, f"{what}: answered {status}\n{text[:1000]}"
    assert_no_traceback(text, what)
    assert text.strip(), f"{what}: a refusal without a message"


HOSTILE_HEADERS = st.fixed_dictionaries(
    {},
    optional={
        "Host": st.sampled_from(["evil.example", "127.0.0.1.evil.example", "", "localhost:1@evil", "x" * 4000]),
        "Origin": st.sampled_from(["http://evil.example", "null", "file://", "http://127.0.0.1.evil.example"]),
        "Content-Type": st.sampled_from(["text/plain", "application/xml", "multipart/form-data", "", "json"]),
        "Accept": st.sampled_from(["text/html", "", "*/*;q=0"]),
    },
).filter(bool)


@FUZZ
@given(headers=HOSTILE_HEADERS, target=st.sampled_from(["/mcp", "/api/v1/sagas/"]))
def test_foreign_host_origin_and_content_type_are_refused_and_write_nothing(
    server: RunningServer, seeded: Seeded, headers: dict[str, str], target: str
) -> None:
    before = rows()
    sent = {**MCP_HEADERS, "Authorization": f"Bearer {ALICE}", **headers}
    body = _begin({"metadata": {}}) if target == "/mcp" else json.dumps({"metadata": {}}).encode()
    answer = httpx.post(f"{server.base}{target}", content=body, headers=sent, timeout=30)
    what = f"POST {target} with {headers}"
    assert answer.status_code < 500, f"{what}: {answer.status_code} {answer.text[:1000]}"
    assert_no_traceback(answer.text, what)
    assert_nothing_of_outsider(answer.text, "", seeded.outsider_ids, what)
    # /mcp checks Origin against DNS rebinding; /api/v1 takes bearer tokens, which a browser cannot send cross-origin
    # without a CORS preflight this server never approves (and the console's session form needs a CSRF token).
    foreign = {"Host", "Origin"} if target == "/mcp" else {"Host"}
    if answer.status_code >= 400 or set(headers) & foreign:
        # Anything refused, and anything from a foreign Host (or Origin, on /mcp), must leave the database as it was.
        assert rows() == before, f"{what} wrote rows ({answer.status_code})"


@pytest.mark.parametrize("target", ["/mcp", "/api/v1/sagas/"])
@pytest.mark.parametrize(
    "case",
    ["declares more than it sends", "declares less than it sends", "declares 2 GiB", "negative", "not a number"],
)
def test_a_content_length_lie_is_refused_and_writes_nothing(
    server: RunningServer, seeded: Seeded, target: str, case: str
) -> None:
    body = _begin({"metadata": {}}) if target == "/mcp" else json.dumps({"metadata": {}}).encode()
    declared = {
        "declares more than it sends": str(len(body) + 500),
        "declares less than it sends": str(len(body) // 2),
        "declares 2 GiB": str(2**31),
        "negative": "-5",
        "not a number": "lots",
    }[case]
    head = (
        f"POST {target} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {ALICE}\r\n"
        f"Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n"
        f"Content-Length: {declared}\r\nConnection: close\r\n"
    )
    before = rows()
    status, text = _raw(server, head, body)
    # 0 (closed without an answer): for "more", the server still waited for the body when we hung up; for "less",
    # the surplus bytes are a malformed next request, on which the server drops the connection.
    if not (status == 0 and case in ("declares more than it sends", "declares less than it sends")):
        _assert_clear_refusal(status, text, f"{target} {case}")
    assert rows() == before


@pytest.mark.parametrize("target", ["/mcp", "/api/v1/sagas/"])
@pytest.mark.parametrize("shape", ["oversize", "list 5000 deep", "object 5000 deep", "object 40 deep"])
def test_oversize_and_deep_bodies_are_refused_and_write_nothing(
    server: RunningServer, seeded: Seeded, target: str, shape: str
) -> None:
    metadata = {
        "oversize": json.dumps({"padding": "x" * (LIMIT + 1)}),
        "list 5000 deep": _deep("list", 5000),
        "object 5000 deep": _deep("object", 5000),
        "object 40 deep": _deep("object", 40),
    }[shape]
    body = _body(target, metadata)
    before = rows()
    headers = {**MCP_HEADERS, "Authorization": f"Bearer {ALICE}"}
    answer = httpx.post(f"{server.base}{target}", content=body, headers=headers, timeout=60)
    what = f"{target} {shape}"
    assert answer.status_code < 500, f"{what}: {answer.status_code} {answer.text[:1000]}"
    assert_no_traceback(answer.text, what)
    # /mcp may answer 200 with a JSON-RPC error or an isError result in its event stream: either names the problem.
    if answer.status_code == 200:
        assert '"error"' in answer.text or '"isError":true' in answer.text, f"{what}: accepted\n{answer.text[:500]}"
    assert rows() == before, f"{what} wrote rows"
