"""A2A command parsing, without a server: the table's strict arguments, field problems listed one by one, JSON
numbers restored from protobuf's doubles, and content the card does not declare refused. That every operation of
the table is served is tests/operations/test_every_surface_serves_the_table.py."""

from __future__ import annotations

import pytest
from a2a.helpers import new_data_part, new_text_part
from a2a.types.a2a_pb2 import Message, Part, Role
from a2a.utils.errors import ContentTypeNotSupportedError, InvalidParamsError

from sagas.operations.arguments import PlanArgs, RunArgs
from sagas.protocols.a2a.commands import parse_command


def _message(command: object, context_id: str = "") -> Message:
    return Message(message_id="m", role=Role.ROLE_USER, parts=[new_data_part(command)], context_id=context_id)


def test_whole_numbers_come_back_as_ints_everywhere_in_the_command():
    command = parse_command(
        _message(
            {
                "operation": "plan",
                "saga_id": "s",
                "action": "charge",
                "input": {"amount": 2500, "ratio": 0.5, "lines": [{"qty": 3}]},
            }
        )
    )
    assert isinstance(command.args, PlanArgs)
    assert command.args.input == {"amount": 2500, "ratio": 0.5, "lines": [{"qty": 3}]}
    assert type(command.args.input["amount"]) is int and type(command.args.input["lines"][0]["qty"]) is int

    run = parse_command(_message({"operation": "run", "saga_id": "s", "max_parallel": 4, "wait_seconds": 1.5}))
    assert isinstance(run.args, RunArgs) and (run.args.max_parallel, run.args.wait_seconds) == (4, 1.5)


def test_an_overlong_context_id_is_refused():
    with pytest.raises(InvalidParamsError, match="contextId is longer than 200"):
        parse_command(_message({"operation": "list_sagas"}, context_id="c" * 201))


def test_field_problems_are_listed_for_the_client_one_by_one():
    with pytest.raises(InvalidParamsError) as refused:
        parse_command(_message({"operation": "checkpoint", "saga_id": 7, "colour": "red"}))
    fields = {problem["field"] for problem in refused.value.data["errors"]}  # type: ignore[index]
    assert fields == {"saga_id", "name", "colour"}


@pytest.mark.parametrize(
    "command",
    [
        {"operation": "begin", "metadata": {"note": "a\x00b"}},
        {"operation": "plan", "saga_id": "s", "action": "a", "input": {"nul\x00key": 1}},
    ],
)
def test_text_no_database_can_store_is_refused_before_anything_runs(command: dict[str, object]):
    # The operations' argument models refuse it, so MCP, A2A and REST answer the same clear error.
    with pytest.raises(InvalidParamsError) as refused:
        parse_command(_message(command))
    assert "NUL character" in str(refused.value.data)


@pytest.mark.parametrize(
    ("parts", "content_type"),
    [
        ([new_text_part("Begin a saga to charge the card, then commit")], "text/plain"),  # bare text
        ([new_text_part("charge the card", media_type="text/plain")], "text/plain"),
        ([new_data_part({"operation": "begin"}, media_type="text/markdown")], "text/markdown"),
        ([Part(raw=b"\x89PNG", media_type="image/png")], "image/png"),
        ([new_data_part({"operation": "begin"}), new_text_part("and hurry")], "text/plain"),
    ],
)
def test_content_the_card_does_not_declare_gets_32005_showing_the_data_part_to_send(
    parts: list[Part], content_type: str
):
    with pytest.raises(ContentTypeNotSupportedError) as refused:
        parse_command(Message(message_id="m", role=Role.ROLE_USER, parts=parts))
    message = refused.value.message
    assert f"Content type {content_type} is not supported" in message and "application/json" in message
    assert '"parts": [{"data": {"operation": "begin", "metadata": {}}}]' in message
    assert "Nothing was created" in message
