"""SAGA_MAX_ARGUMENT_STRING_BYTES: a string anywhere in an operation's JSON arguments (a key too) longer than the
limit, in UTF-8 bytes, is refused as INVALID_ARGUMENTS naming the setting and where the string is, before anything
is stored, on every surface (the check is the argument models', which MCP, A2A and REST share). The proxy's own
operations, which carry an agent's downstream arguments and the downstream's answer unchanged, are not bounded."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import override_settings

from audit.models import AuditEvent
from governance.identity.principal import Principal
from sagas.errors import InvalidInput
from sagas.models import Checkpoint, Node, Saga
from sagas.operations.invoke import invoke
from sagas.operations.proxied import CallBeginArgs, CallFinishArgs
from sagas.operations.table import OPERATIONS
from tests.proxy.facts import call_facts
from tests.startup import refused_at_start_up

LIMIT = 1024
pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("small_string_limit")]


@pytest.fixture
def small_string_limit() -> Any:
    with override_settings(SAGA_MAX_ARGUMENT_STRING_BYTES=LIMIT):
        yield


def _stored() -> tuple[int, int, int, int]:
    return Saga.objects.count(), Node.objects.count(), Checkpoint.objects.count(), AuditEvent.objects.count()


def _refused(operation: str, actor: Principal, arguments: dict[str, Any]) -> str:
    before = _stored()
    with pytest.raises(InvalidInput) as refused:
        invoke(OPERATIONS[operation], actor, arguments)
    assert _stored() == before
    assert refused.value.code == "INVALID_ARGUMENTS"
    return refused.value.message


def test_a_metadata_string_over_the_limit_is_refused_naming_the_setting_and_its_path(operator: Principal):
    message = _refused("begin_saga", operator, {"metadata": {"notes": ["ok", "x" * (LIMIT + 1)]}})

    assert "metadata.notes[1] is a string of 1025 bytes" in message
    assert f"at most {LIMIT} bytes (SAGA_MAX_ARGUMENT_STRING_BYTES)" in message
    assert "pass a reference" in message and "Nothing was created or changed" in message


def test_a_string_at_the_limit_is_kept(operator: Principal):
    saga = invoke(OPERATIONS["begin_saga"], operator, {"metadata": {"notes": "x" * LIMIT}})

    assert Saga.objects.get(pk=saga["id"]).metadata["notes"] == "x" * LIMIT


def test_the_limit_counts_utf8_bytes_not_characters(operator: Principal):
    message = _refused("begin_saga", operator, {"metadata": {"city": "é" * 600}})  # 600 characters, 1200 bytes

    assert "metadata.city is a string of 1200 bytes" in message


def test_a_key_over_the_limit_is_refused_too(operator: Principal):
    message = _refused("begin_saga", operator, {"metadata": {"k" * (LIMIT + 1): 1}})

    assert "metadata (a key) is a string of 1025 bytes" in message


def test_a_step_input_and_checkpoint_data_over_the_limit_write_nothing(operator: Principal):
    saga = invoke(OPERATIONS["begin_saga"], operator, {})
    long = "x" * (LIMIT + 1)

    planned = {"saga_id": saga["id"], "action": "charge_card", "input": {"memo": {"text": long}}, "key": "charge"}
    assert "input.memo.text" in _refused("plan_saga_step", operator, planned)
    checkpoint = {"saga_id": saga["id"], "name": "notes", "data": {"body": long}}
    assert "data.body" in _refused("checkpoint_saga", operator, checkpoint)


def test_the_proxys_operations_pass_long_downstream_arguments_and_answers_through():
    long = "x" * (LIMIT * 4)

    call = call_facts("write_file")
    begun = CallBeginArgs.model_validate({"saga_id": "s", "call": call, "arguments": {"content": long}})
    outcome = {"kind": "answered", "result": {"text": long}}
    finished = CallFinishArgs.model_validate({"saga_id": "s", "step_id": "t", "outcome": outcome})

    assert begun.arguments["content"] == long and finished.outcome.result == {"text": long}


@pytest.mark.parametrize("value", ["1023", "67108865", "long"])
def test_a_string_limit_out_of_range_stops_start_up(value: str) -> None:
    refused_at_start_up("SAGA_MAX_ARGUMENT_STRING_BYTES", value)
