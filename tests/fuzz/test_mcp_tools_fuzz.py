"""Every MCP tool fed hostile arguments over Streamable HTTP against a real `semantic-saga serve` (issue 20, item 3).

Arguments are arbitrary JSON, wrong types for each documented parameter, huge strings, deep nesting, and the other
tenant's saga and node ids used by alice. Every answer is a tool result or a JSON-RPC error, never a 5xx or a
traceback; a refused call (isError, or a JSON-RPC error) names what was wrong and writes no row; no answer carries
anything of the other tenant's saga.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from mcp.shared.exceptions import MCPError

from sagas.operations.table import MCP_TOOLS
from tests.fuzz.conftest import Seeded, rows
from tests.fuzz.hostile import FUZZ, assert_no_traceback, assert_nothing_of_outsider, hostile, json_values
from tests.fuzz.session import open_session
from tests.protocols.conftest import ALICE, RunningServer

TOOLS = sorted(MCP_TOOLS)


def arguments(tool: str, seeded: Seeded) -> st.SearchStrategy[dict[str, Any]]:
    names = list(MCP_TOOLS[tool].arguments.model_json_schema().get("properties", {}))
    values = hostile([*seeded.outsider_ids, "w"])
    documented = st.dictionaries(st.sampled_from(names), values, max_size=len(names)) if names else st.just({})
    # The other tenant's ids where ids belong, everything else left out or plausible.
    outsider = st.fixed_dictionaries(
        {},
        optional={
            "saga_id": st.just(seeded.outsider_saga),
            "node_id": st.sampled_from([seeded.outsider_node, "w"]),
            "approved": st.booleans(),
            "action": st.just("fuzz.wire"),
            "input": st.just({}),
        },
    ).map(lambda args: {**args, "saga_id": seeded.outsider_saga} if "saga_id" in names else args)
    return st.one_of(documented, outsider, st.dictionaries(st.text(max_size=12), json_values, max_size=4))


def _text(answer: Any) -> str:
    if isinstance(answer, MCPError):
        return f"{answer.code} {answer}"
    content = " ".join(getattr(block, "text", "") for block in answer.content)
    return content + json.dumps(answer.structured_content, default=str)


def _check(tool: str, args: dict[str, Any], answer: Any, before: dict[str, int], seeded: Seeded) -> None:
    what = f"{tool}({json.dumps(args, default=str)[:300]})"
    text = _text(answer)
    assert_no_traceback(text, what)
    assert_nothing_of_outsider(text, json.dumps(args, default=str), seeded.outsider_ids, what)
    if isinstance(answer, MCPError):
        assert str(answer).strip(), f"{what}: a JSON-RPC error without a message"
    elif answer.is_error:
        error = (answer.structured_content or {}).get("error", {})
        assert error.get("code") and error.get("message"), f"{what}: an isError result without code and message"
    else:
        return
    assert rows() == before, f"{what} was refused but wrote rows"


@pytest.mark.parametrize("tool", TOOLS)
def test_every_tool_refuses_hostile_arguments_clearly_and_writes_nothing(
    tool: str, server: RunningServer, seeded: Seeded
) -> None:
    with open_session(server.mcp_url, ALICE) as session:

        @FUZZ
        @given(args=arguments(tool, seeded))
        def fuzz(args: dict[str, Any]) -> None:
            before = rows()
            answer = session.call_tool(tool, args)
            _check(tool, args, answer, before, seeded)

        fuzz()
        assert not [s for s in session.statuses if s >= 500], f"{tool}: server errors {session.statuses}"
    assert "Traceback" not in server.log.read_text(), server.log.read_text()[-5000:]
