"""What the fast path reads as the SDK reads it, and what it leaves to the SDK (sagas.protocols.proxy.raw_channel's
`strict_loads`): an outside review found bodies the two parsers read differently."""

from __future__ import annotations

import pydantic_core
import pytest

from sagas.protocols.proxy.raw_channel import DEEPEST, strict_loads

CALL = b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"lookup","arguments":{"key":%s}}}'


def test_a_plain_call_is_read():
    assert strict_loads(CALL % b'"k"')["params"]["arguments"] == {"key": "k"}


def test_a_byte_order_mark_is_left_to_the_sdk_which_refuses_it():
    framed = b"\xef\xbb\xbf" + CALL % b'"k"'
    with pytest.raises(ValueError):
        pydantic_core.from_json(framed)
    with pytest.raises(ValueError, match="byte-order mark"):
        strict_loads(framed)


@pytest.mark.parametrize("depth", [DEEPEST + 1, 199, 500, 5000])
def test_arguments_nested_past_the_limit_are_left_to_the_sdk(depth: int):
    with pytest.raises(ValueError, match="nested too deep"):
        strict_loads(CALL % (b"[" * depth + b"]" * depth))


def test_arguments_nested_within_the_limit_are_read():
    depth = DEEPEST - 5  # the envelope's own two levels and the arguments' one come on top
    assert strict_loads(CALL % (b"[" * depth + b"]" * depth))["params"]["name"] == "lookup"


def test_many_brackets_side_by_side_are_not_depth():
    flat = b"[" + b",".join([b"[]"] * (DEEPEST * 3)) + b"]"
    assert len(strict_loads(CALL % flat)["params"]["arguments"]["key"]) == DEEPEST * 3
