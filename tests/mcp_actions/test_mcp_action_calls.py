"""One MCP action call against the real demo server: receipts, the _meta idempotency key, isError, transport
failures (before and after the request left), secrets, and the stdio transport."""

from __future__ import annotations

import contextlib
import json
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from audit.canonical import sha256_hex
from registry.actions import invoke_compensation, invoke_forward
from registry.errors import ActionFailure
from tests.distributed.workers import free_port
from tests.mcp_actions.conftest import DemoWorld, context, create_contact, http_server, mcp_contract, stdio_server

ADA = {"name": "Ada", "email": "ada@example.com"}


def _transfer(url: str, **options: object) -> dict[str, object]:
    return mcp_contract(
        "transfer_funds",
        http_server(url),
        {"tool": "transfer_funds", "arguments": "${input}", **options},
        reversibility="irreversible",
    )


def _closed_port() -> int:
    return free_port()


def test_forward_receipt_is_the_tool_answer_and_compensation_reads_it(crm: DemoWorld):
    # given a create_contact action with a delete_contact compensation
    contract = create_contact(http_server(crm.url))
    # when it runs forward, then compensates from the stored receipt
    receipt = invoke_forward(contract, context("step-a", **ADA))
    undo = invoke_compensation(contract, context("step-a", compensation=True, result=receipt))
    # then the receipt holds the payload (structuredContent) and the answer's text, the undo deleted that contact,
    # and each call carried its key
    assert (receipt["tool"], receipt["result"], receipt["result_from"]) == (
        "create_contact",
        {"id": "c-1", **ADA},
        "structuredContent",
    )
    assert [block["type"] for block in receipt["content"]] == ["text"]
    assert (undo["tool"], undo["result"]) == ("delete_contact", {"id": "c-1", "deleted": True})
    assert crm.keys("create_contact") == ["step-a"]
    assert crm.keys("delete_contact") == ["step-a:rollback"]
    assert crm.state()["contacts"] == {}


def test_step_id_reaches_meta_so_a_retry_is_applied_once(crm: DemoWorld):
    # given the same step attempted twice (a retry reuses the step id)
    contract = create_contact(http_server(crm.url))
    # when
    first = invoke_forward(contract, context("step-b", **ADA))
    second = invoke_forward(contract, context("step-b", **ADA))
    # then the server saw the key twice and, deduplicating on it, created one contact
    assert crm.keys("create_contact") == ["step-b", "step-b"]
    assert first == second and list(crm.state()["contacts"]) == ["c-1"]


def test_is_error_answer_is_a_permanent_failure_with_the_answer_as_receipt(crm: DemoWorld):
    # given a transfer larger than the balance
    contract = _transfer(crm.url)
    # when
    with pytest.raises(ActionFailure) as caught:
        invoke_forward(contract, context(from_account="acc-payroll", to_account="acc-vendor", amount=10**9))
    # then it is a failure the coordinator will not retry, and nothing is uncertain
    failure = caught.value
    assert (failure.code, failure.retryable, failure.uncertain) == ("MCP_TOOL_ERROR", False, False)
    assert "answered isError" in failure.message and "insufficient funds in acc-payroll" in failure.message
    assert failure.receipt["is_error"] is True and failure.receipt["tool"] == "transfer_funds"
    assert crm.state()["accounts"] == {"acc-payroll": 100_000, "acc-vendor": 0}


def test_is_error_is_retryable_only_when_the_contract_says_so(crm: DemoWorld):
    contract = _transfer(crm.url, is_error_retryable=True)
    with pytest.raises(ActionFailure) as caught:
        invoke_forward(contract, context(from_account="acc-payroll", to_account="acc-vendor", amount=10**9))
    assert caught.value.retryable is True and caught.value.uncertain is False


def test_unreachable_server_is_reported_clearly_and_is_safe_to_retry():
    # given a server block pointing at a port nobody listens on
    url = f"http://127.0.0.1:{_closed_port()}/mcp"
    # when
    with pytest.raises(ActionFailure) as caught:
        invoke_forward(create_contact(http_server(url)), context(**ADA))
    # then nothing was sent, so the failure is certain and retryable, and the message names the server
    failure = caught.value
    assert (failure.code, failure.retryable, failure.uncertain) == ("MCP_CONNECT_FAILED", True, False)
    assert f"Connecting to {url} failed (ConnectError" in failure.message
    assert "No tool was called, so retrying is safe" in failure.message


@pytest.mark.parametrize("idempotent", [False, True])
def test_answer_lost_after_the_call_was_sent_is_uncertain(crm: DemoWorld, idempotent: bool):
    # given a server that receives the call but cannot answer in time (the world is locked by the test)
    contract = create_contact(http_server(crm.url), idempotent=idempotent)
    contract["forward"]["timeout_seconds"] = 1
    # when
    with crm.world.lock, pytest.raises(ActionFailure) as caught:
        invoke_forward(contract, context("step-c", **ADA))
    # then the outcome is uncertain, retried only for an idempotent tool
    failure = caught.value
    assert (failure.code, failure.uncertain, failure.retryable) == ("MCP_TIMEOUT", True, idempotent)
    assert "was sent to" in failure.message and "may or may not have acted" in failure.message
    # and indeed the call went through once the server could proceed
    deadline = time.monotonic() + 10
    while not crm.state()["contacts"] and time.monotonic() < deadline:
        time.sleep(0.05)
    assert crm.keys("create_contact") == ["step-c"]


def test_secret_header_is_resolved_at_call_time_and_a_missing_one_sends_nothing(
    crm: DemoWorld, monkeypatch: pytest.MonkeyPatch
):
    # given a contract whose server header references a secret
    server = http_server(
        crm.url, headers={"Authorization": {"secret_ref": "env://DEMO_CRM_TOKEN", "prefix": "Bearer "}}
    )
    contract = create_contact(server)
    # when the secret is missing
    monkeypatch.delenv("DEMO_CRM_TOKEN", raising=False)
    with pytest.raises(ActionFailure) as caught:
        invoke_forward(contract, context(**ADA))
    # then nothing was sent
    assert caught.value.code == "SECRET_UNAVAILABLE" and crm.calls() == []
    # and once it is set, the call goes through
    monkeypatch.setenv("DEMO_CRM_TOKEN", "s3cret")
    assert invoke_forward(contract, context(**ADA))["result"]["id"] == "c-1"


def test_compensation_without_the_fields_it_needs_sends_nothing(crm: DemoWorld):
    contract = create_contact(http_server(crm.url))
    with pytest.raises(ActionFailure) as caught:
        invoke_compensation(contract, context(compensation=True, result=None))
    assert caught.value.code == "TEMPLATE_PATH_MISSING" and crm.calls() == []


def test_stdio_server_call_carries_the_idempotency_key(tmp_path: Path):
    # given the demo world started over stdio, its state kept in a file between processes
    state = tmp_path / "world.json"
    contract = create_contact(stdio_server(state))
    # when the action runs forward and compensates
    receipt = invoke_forward(contract, context("step-d", **ADA))
    invoke_compensation(contract, context("step-d", compensation=True, result=receipt))
    # then both calls reached the process with their keys
    calls = json.loads(state.read_text())["calls"]
    assert [(c["tool"], c["idempotency_key"]) for c in calls] == [
        ("create_contact", "step-d"),
        ("delete_contact", "step-d:rollback"),
    ]


def test_stdio_command_that_cannot_start_or_dies_is_reported_clearly():
    # given a command that does not exist, and one that exits with an error before speaking MCP
    missing = {"transport": "stdio", "command": "/nonexistent/crm-mcp"}
    dying = {
        "transport": "stdio",
        "command": sys.executable,
        "args": ["-c", "import sys; sys.stderr.write('crm: config file missing'); sys.exit(3)"],
    }
    # when / then: the first is permanent, the second quotes the server's stderr; neither sent anything
    with pytest.raises(ActionFailure) as not_started:
        invoke_forward(create_contact(missing), context(**ADA))
    assert (not_started.value.code, not_started.value.retryable) == ("MCP_SERVER_START_FAILED", False)
    assert "Could not start the stdio server `/nonexistent/crm-mcp`" in not_started.value.message
    with pytest.raises(ActionFailure) as died:
        invoke_forward(create_contact(dying), context(**ADA))
    assert (died.value.code, died.value.uncertain) == ("MCP_CONNECT_FAILED", False)
    assert "the server's stderr ends with: crm: config file missing" in died.value.message


def test_lost_answer_after_a_capture_keeps_the_prior_state_in_the_receipt(
    crm: DemoWorld, monkeypatch: pytest.MonkeyPatch
):
    # given a contact, and a rename that captures it first
    before = crm.call_tool("create_contact", ADA)
    contract = mcp_contract(
        "rename_contact",
        http_server(crm.url),
        {"tool": "update_contact", "arguments": {"id": "${input.id}", "name": "${input.name}"}, "timeout_seconds": 2},
        capture={"tool": "get_contact", "arguments": {"id": "${input.id}"}},
        compensation={"tool": "update_contact", "arguments": {"id": "${input.id}", "name": "${pre_state.name}"}},
    )
    # and a world whose second access in this test (the update, after the capture read) stalls
    release, opened, open_world = threading.Event(), [], crm.world.open

    @contextlib.contextmanager
    def stalling_open() -> Iterator[dict[str, Any]]:
        opened.append(True)
        if len(opened) == 2:
            release.wait(10)
        with open_world() as data:
            yield data

    monkeypatch.setattr(crm.world, "open", stalling_open)
    # when the update's answer never arrives
    try:
        with pytest.raises(ActionFailure) as caught:
            invoke_forward(contract, context("step-e", id=before["id"], name="Ada King"))
    finally:
        release.set()
    # then the failure is uncertain and still carries the captured prior state for whoever reconciles it
    failure = caught.value
    assert (failure.code, failure.uncertain) == ("MCP_TIMEOUT", True)
    assert failure.receipt == {"tool": "update_contact", "pre_state": before, "pre_state_sha256": sha256_hex(before)}
