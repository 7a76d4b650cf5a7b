"""SAGA_MAX_ACTION_RESULT_BYTES for `kind: mcp` actions, against the real demo server: a success answer over the
limit is RESULT_TOO_LARGE, uncertain and not retried, keeping the captured prior state for the inverse; a capture
answer over it stops the call before the forward tool is sent."""

from __future__ import annotations

import pytest
from django.test import override_settings

from audit.canonical import sha256_hex
from registry.actions import invoke_forward
from registry.errors import ActionFailure
from tests.mcp_actions.conftest import DemoWorld, context, create_contact, http_server, mcp_contract

LIMIT = 1024
LONG_NAME = "n" * (LIMIT + 100)


def _rename(url: str) -> dict[str, object]:
    return mcp_contract(
        "rename_contact",
        http_server(url),
        {"tool": "update_contact", "arguments": {"id": "${input.id}", "name": "${input.name}"}},
        capture={"tool": "get_contact", "arguments": {"id": "${input.id}"}},
        compensation={"tool": "update_contact", "arguments": {"id": "${input.id}", "name": "${pre_state.name}"}},
        idempotent=True,
    )


@override_settings(SAGA_MAX_ACTION_RESULT_BYTES=LIMIT)
def test_a_success_answer_over_the_limit_is_uncertain_and_keeps_the_prior_state(crm: DemoWorld):
    before = crm.call_tool("create_contact", {"name": "Ada", "email": "ada@example.com"})

    with pytest.raises(ActionFailure) as caught:
        invoke_forward(_rename(crm.url), context("step-r", id=before["id"], name=LONG_NAME))

    failure = caught.value
    assert (failure.code, failure.uncertain, failure.retryable) == ("RESULT_TOO_LARGE", True, False)
    assert "SAGA_MAX_ACTION_RESULT_BYTES" in failure.message and "update_contact" in failure.message
    assert failure.receipt["pre_state"] == before and failure.receipt["pre_state_sha256"] == sha256_hex(before)
    assert failure.receipt["truncated"] is True and len(failure.receipt["text"]) <= 2000
    assert crm.state()["contacts"][before["id"]]["name"] == LONG_NAME  # the tool did act


@override_settings(SAGA_MAX_ACTION_RESULT_BYTES=LIMIT)
def test_a_capture_over_the_limit_sends_nothing(crm: DemoWorld):
    big = crm.call_tool("create_contact", {"name": LONG_NAME, "email": "big@example.com"})

    with pytest.raises(ActionFailure) as caught:
        invoke_forward(_rename(crm.url), context("step-c", id=big["id"], name="Short"))

    failure = caught.value
    assert (failure.code, failure.uncertain, failure.retryable) == ("RESULT_TOO_LARGE", False, False)
    assert "forward call was NOT made" in failure.message and "SAGA_MAX_ACTION_RESULT_BYTES" in failure.message
    assert crm.calls("update_contact") == []


@override_settings(SAGA_MAX_ACTION_RESULT_BYTES=LIMIT)
def test_an_answer_within_the_limit_is_the_receipt(crm: DemoWorld):
    receipt = invoke_forward(create_contact(http_server(crm.url)), context("step-s", name="Ada", email="a@x.io"))

    assert receipt["tool"] == "create_contact" and receipt["result"] == {"id": "c-1", "name": "Ada", "email": "a@x.io"}
