"""The MCP proxy's tools/call fed hostile arguments and tool names (issue 20, item 3), on the journaled path over a
real downstream (tests/proxy/tiny_server.py over stdio). Each answer is a tool result or a JSON-RPC error, never a
5xx or a traceback; a name the catalog does not have is refused, never forwarded."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from mcp.shared.exceptions import MCPError

from sagas.protocols.proxy.runtime import journaled
from tests.fuzz.hostile import FUZZ, assert_no_traceback, hostile, json_values
from tests.fuzz.session import open_session
from tests.proxy.harness import TINY, config_file, serve_proxy, stdio

pytestmark = pytest.mark.django_db(transaction=True)
# Tools that answer at once without asking the client anything (no elicitation, sampling, hanging or approval).
TOOLS = ["send_email", "env_has", "echo_env"]
arguments = st.one_of(
    st.dictionaries(st.sampled_from(["to", "subject", "body", "name"]), hostile(["x"]), max_size=4),
    st.dictionaries(st.text(max_size=12), json_values, max_size=4),
)
names = st.one_of(st.sampled_from(TOOLS), st.sampled_from(["", "no_such_tool", "tiny__send_email", "../x", "a" * 300]))


def test_hostile_proxied_calls_are_answered_clearly(tmp_path: Any) -> None:
    config = config_file(tmp_path, {"tiny": stdio(TINY)})
    with serve_proxy(config, call_path=journaled) as served, open_session(served.url, None) as session:

        @FUZZ
        @given(name=names, args=arguments)
        def fuzz(name: str, args: dict[str, Any]) -> None:
            answer = session.call_tool(name, args)
            what = f"{name}({json.dumps(args)[:200]})"
            if isinstance(answer, MCPError):
                assert str(answer).strip(), what
                text = str(answer)
            else:
                assert name in TOOLS, f"{what}: a tool the catalog does not have answered a result"
                text = " ".join(getattr(block, "text", "") for block in answer.content)
            assert_no_traceback(text, what)

        fuzz()
        assert not [s for s in session.statuses if s >= 500], session.statuses
