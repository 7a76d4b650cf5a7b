"""The bound on a downstream's answer, where the bytes arrive: lines within the limit pass whole whatever the
chunking; a longer line is never kept past a few hundred bytes, and the JSON-RPC id it answers is found whichever
end the sender put it at (the Python SDK writes it first, the TypeScript SDK last)."""

from __future__ import annotations

import json

import pytest

from sagas.protocols.proxy.result_cap import LineCap, Oversized, synthesized_answer

LIMIT = 1000


def _feed(cap: LineCap, data: bytes, chunk: int) -> list[bytes | Oversized]:
    out: list[bytes | Oversized] = []
    for start in range(0, len(data), chunk):
        out += cap.feed(data[start : start + chunk])
    return out


@pytest.mark.parametrize("chunk", [1, 7, 64, 4096])
def test_lines_within_the_limit_pass_whole_whatever_the_chunks(chunk: int):
    lines = [json.dumps({"jsonrpc": "2.0", "id": n, "result": {"text": "x" * n * 9}}).encode() for n in range(50)]
    assert _feed(LineCap(LIMIT), b"\n".join(lines) + b"\n", chunk) == [line for line in lines]


@pytest.mark.parametrize(
    "message",
    [
        {"jsonrpc": "2.0", "id": 7, "result": {"text": "z" * 50_000}},  # the Python SDK's order: id first
        {"result": {"text": "z" * 50_000}, "jsonrpc": "2.0", "id": 7},  # the TypeScript SDK's: id last
        {"jsonrpc": "2.0", "id": "req-7", "result": {"text": "z" * 50_000}},
    ],
)
@pytest.mark.parametrize("chunk", [1000, 65536])
def test_an_oversized_line_is_dropped_and_names_the_request_it_answers(message: dict, chunk: int):
    cap = LineCap(LIMIT)
    line = json.dumps(message).encode()
    found = _feed(cap, line + b"\n" + b'{"jsonrpc": "2.0", "id": 8, "result": {}}\n', chunk)
    assert found[0] == Oversized(len(line), message["id"])
    assert found[1] == b'{"jsonrpc": "2.0", "id": 8, "result": {}}'  # the next message passes as it came
    answer = synthesized_answer(found[0], LIMIT)  # type: ignore[arg-type]
    assert answer["id"] == message["id"] and answer["error"]["data"]["io.semantic-saga/result_too_large"] == {
        "size_bytes": len(line),
        "limit_bytes": LIMIT,
    }


def test_an_oversized_line_is_never_kept_whole():
    cap = LineCap(LIMIT)
    cap.feed(b'{"jsonrpc": "2.0", "id": 1, "result": "' + b"z" * 5_000_000)
    assert len(cap._line) <= 512 and len(cap._tail) <= 512  # while it streams: a head and a tail, never the rest
    assert cap.feed(b'"}\n') == [Oversized(5_000_000 + 41, 1)]


def test_an_oversized_message_without_an_id_says_so():
    notification = b'{"jsonrpc": "2.0", "method": "notifications/message", "params": "' + b"z" * 2000 + b'"}'
    assert LineCap(LIMIT).feed(notification + b"\n") == [Oversized(len(notification), None)]
