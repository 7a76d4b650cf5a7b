"""Request size limits, enforced before anything is stored: a body over SAGA_MAX_REQUEST_BYTES (1 MiB by default)
is refused by /a2a and /mcp with HTTP 413 whether or not it declares its length, and an A2A command whose message
metadata exceeds SAGA_A2A_MAX_METADATA_BYTES is refused before a task exists (issue 20: a 3 MB metadata message used
to be stored whole with its rejected task)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from sagas.models import A2ATask, McpTask, Saga
from tests.protocols.conftest import ALICE, RunningServer
from tests.startup import refused_at_start_up

A2A = {"Content-Type": "application/json", "A2A-Version": "1.0", "Authorization": f"Bearer {ALICE}"}
MCP = {
    "Content-Type": "application/json",
    "Accept": "application/json, text/event-stream",
    "Authorization": f"Bearer {ALICE}",
}
LIMIT = 1024 * 1024


def _send_message(metadata_bytes: int) -> dict[str, Any]:
    message = {
        "messageId": "m1",
        "role": "ROLE_USER",
        "parts": [{"data": {"operation": "begin", "metadata": {}}}],
        "metadata": {"padding": "x" * metadata_bytes},
    }
    return {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message}}


def _rows() -> tuple[int, int, int]:
    return A2ATask.objects.count(), Saga.objects.count(), McpTask.objects.count()


def test_an_a2a_message_with_3_mb_of_metadata_is_refused_before_it_is_read_and_nothing_is_stored(
    server: RunningServer,
):
    before = _rows()
    answer = httpx.post(f"{server.base}/a2a", json=_send_message(3 * 1024 * 1024), headers=A2A, timeout=60)

    assert answer.status_code == 413
    error = answer.json()["error"]
    assert error["code"] == -32600 and "SAGA_MAX_REQUEST_BYTES" in error["message"] and str(LIMIT) in error["message"]
    assert _rows() == before


def test_a_body_without_a_declared_length_is_counted_and_refused_too(server: RunningServer):
    body = json.dumps(_send_message(2 * LIMIT)).encode()

    def chunks() -> Iterator[bytes]:  # a generator body is sent chunked: no Content-Length to trust
        for start in range(0, len(body), 64 * 1024):
            yield body[start : start + 64 * 1024]

    before = _rows()
    for path, headers in (("/a2a", A2A), ("/mcp", MCP)):
        answer = httpx.post(f"{server.base}{path}", content=chunks(), headers=headers, timeout=60)
        assert answer.status_code == 413, (path, answer.text)
    assert _rows() == before


def test_an_mcp_body_over_the_limit_is_refused_with_413(server: RunningServer):
    call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "begin_saga"}}
    call["params"]["arguments"] = {"metadata": {"padding": "x" * (LIMIT + 1)}}
    before = _rows()

    answer = httpx.post(f"{server.base}/mcp", json=call, headers=MCP, timeout=60)

    assert answer.status_code == 413
    assert _rows() == before


def test_an_a2a_command_whose_metadata_is_over_its_own_bound_is_refused_before_a_task_exists(server: RunningServer):
    before = _rows()
    answer = httpx.post(f"{server.base}/a2a", json=_send_message(20 * 1024), headers=A2A, timeout=30)

    error = answer.json()["error"]
    assert error["code"] == -32602
    assert "SAGA_A2A_MAX_METADATA_BYTES" in error["message"] and "Nothing was created" in error["message"]
    assert _rows() == before


def test_small_metadata_still_makes_a_command(server: RunningServer):
    answer = httpx.post(f"{server.base}/a2a", json=_send_message(100), headers=A2A, timeout=30)

    assert answer.json()["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"


@pytest.mark.parametrize(
    ("variable", "value"),
    [("SAGA_MAX_REQUEST_BYTES", "100"), ("SAGA_MAX_REQUEST_BYTES", "lots"), ("SAGA_A2A_MAX_METADATA_BYTES", "-1")],
)
def test_a_limit_out_of_range_stops_start_up(variable: str, value: str) -> None:
    refused_at_start_up(variable, value)
