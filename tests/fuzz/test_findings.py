"""Regression tests, one per finding of the fuzzers (issue 20, items 3 and 4)."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from governance.policy.facts import PolicyFileError
from governance.policy.json_rules import JsonPolicy
from registry.errors import RegistryError
from registry.services import registry_load_file
from tests.fuzz.conftest import Seeded, rows
from tests.fuzz.hostile import nested_object
from tests.protocols.conftest import ALICE, RunningServer
from tests.protocols.mcp_client import connect, refused
from tests.startup import refused_at_start_up

AUTH = {"Authorization": f"Bearer {ALICE}", "Content-Type": "application/json"}


def test_metadata_nested_200_deep_is_refused_before_a_saga_exists(server: RunningServer, seeded: Seeded):
    # Found: begin_saga stored it, and its answer was too deep for the official client to parse.
    before = rows()

    async def scenario() -> dict[str, Any]:
        async with connect(server.mcp_url, ALICE, "auto") as client:
            return await refused(client, "begin_saga", {"metadata": nested_object(200)})

    error = asyncio.run(scenario())
    assert error["code"] == "INVALID_ARGUMENTS" and "SAGA_MAX_ARGUMENT_DEPTH" in error["message"], error
    assert rows() == before


def test_checkpoint_data_at_the_depth_limit_is_kept(server: RunningServer, seeded: Seeded):
    async def scenario() -> Any:
        async with connect(server.mcp_url, ALICE, "auto") as client:
            data = nested_object(31)
            return await client.call_tool("checkpoint_saga", {"saga_id": seeded.own_saga, "name": "deep", "data": data})

    answer = asyncio.run(scenario())
    assert not answer.is_error, answer.content


def test_rest_body_nested_5000_deep_is_a_400_not_a_500(server: RunningServer, seeded: Seeded):
    # Found: json.loads' RecursionError answered 500 INTERNAL_ERROR.
    body = '{"metadata": ' + '{"a":' * 5000 + "1" + "}" * 5000 + "}"
    answer = httpx.post(f"{server.base}/api/v1/sagas/", content=body, headers=AUTH, timeout=30)
    assert answer.status_code == 400 and "SAGA_MAX_ARGUMENT_DEPTH" in answer.text, answer.text


def test_rest_body_declaring_2_gib_is_refused_with_413_before_it_is_read(server: RunningServer, seeded: Seeded):
    # Found: /api/v1 had no body limit; Django spooled whatever came until the client gave up.
    before = rows()

    def body() -> Iterator[bytes]:
        yield b'{"metadata": {"padding": "'
        for _ in range(40):
            yield b"x" * 64 * 1024
        yield b'"}}'

    answer = httpx.post(f"{server.base}/api/v1/sagas/", content=body(), headers=AUTH, timeout=60)  # no length
    assert answer.status_code == 413, answer.text
    port = server.base.rsplit(":", 1)[1]
    head = f"POST /api/v1/sagas/ HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer {ALICE}\r\n"
    head += f"Content-Type: application/json\r\nContent-Length: {2**31}\r\nConnection: close\r\n\r\n{{}}"
    with socket.create_connection(("127.0.0.1", int(port)), timeout=30) as sock:
        sock.sendall(head.encode())  # httpx refuses to send a false length: raw bytes, and no shutdown (no EOF)
        received = b""
        while chunk := sock.recv(65536):  # the server closes after its answer (Connection: close)
            received += chunk
    answer_text = received.decode()
    assert answer_text.startswith("HTTP/1.1 413") and "SAGA_MAX_REQUEST_BYTES" in answer_text, answer_text
    assert rows() == before


@pytest.mark.parametrize("value", ["1", "129", "deep"])
def test_argument_depth_out_of_range_stops_start_up(value: str) -> None:
    refused_at_start_up("SAGA_MAX_ARGUMENT_DEPTH", value)


DEEP_FILE = '{"a":' * 5000 + "1" + "}" * 5000


@pytest.mark.django_db
def test_a_registry_file_nested_5000_deep_is_a_registry_error_not_a_traceback(tmp_path: Path) -> None:
    # Found: json.loads' RecursionError escaped registry_load_file (load_actions, SAGA_ACTIONS_FILE at start-up).
    path = tmp_path / "actions.json"
    path.write_text(DEEP_FILE)
    with pytest.raises(RegistryError) as refused:
        registry_load_file(path)
    assert refused.value.code == "INVALID_REGISTRY_FILE" and "nested too deeply" in str(refused.value)


def test_a_policy_file_nested_5000_deep_is_a_policy_file_error_not_a_traceback(tmp_path: Path) -> None:
    # Found: json.loads' RecursionError escaped JsonPolicy.load (SAGA_POLICY_FILE).
    path = tmp_path / "policy.json"
    path.write_text(DEEP_FILE)
    with pytest.raises(PolicyFileError) as refused:
        JsonPolicy.load(path)
    assert "nested too deeply" in refused.value.message
