"""Issue 39, row 6: a downstream's elicitation that copies the proxy's own approval form. The person at the agent's
client can tell who asks: a server's form reaches the client marked with the server's name; one that reuses the
property of the proxy's approval form is refused before anyone sees it; and a deployment can refuse a server's
elicitation altogether (`"elicitation": "refuse"`), the server answered with an error. What the server got back is
read from its own record (tests/proxy/hostile_server.py --elicit-copy)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import mcp.types as types
import pytest

from sagas.protocols.proxy.inbound import marked
from tests.proxy.guardian import TRANSPORTS, Guarded, guarded_proxy, hostile, hostile_over_http

pytestmark = pytest.mark.django_db(transaction=True)
MARK = '[asked by the MCP server "h", not by Semantic Saga]'
COPIED = 'An AI agent asks to run "purge_cache" on the MCP server "h".'


class Person:
    """The user of the agent's client: sees each form, accepts it."""

    def __init__(self) -> None:
        self.forms: list[types.ElicitRequestParams] = []

    async def __call__(self, context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        self.forms.append(params)
        return types.ElicitResult(action="accept", content={"run_it": True})


@contextlib.contextmanager
def _proxy(transport: str, tmp_path: Path, **server: Any) -> Iterator[Guarded]:
    """A proxy in front of the copying server "h" (stdio behind the stdio proxy, HTTP behind `serve`)."""
    called = tmp_path / "called.jsonl"
    with contextlib.ExitStack() as stack:
        if transport == "stdio":
            entry = hostile("--elicit-copy", called=called)
        else:
            entry = stack.enter_context(hostile_over_http("--elicit-copy", called=called))
        yield stack.enter_context(guarded_proxy(transport, tmp_path, {"h": {**entry, **server}}))


def _ask(guarded: Guarded, person: Person, schema: str) -> dict[str, Any]:
    """Call copy_approval; what the server recorded getting back from its elicitation."""

    async def scenario() -> None:
        async with guarded.agent(elicitation_callback=person) as client:
            await client.call_tool("copy_approval", {"schema": schema})

    anyio.run(scenario)
    record: dict[str, Any] = next(
        line for line in guarded.calls() if "elicitation" in line or "elicitation_error" in line
    )
    return record


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_servers_form_reaches_the_person_marked_as_the_servers(transport: str, tmp_path: Path):
    person = Person()
    with _proxy(transport, tmp_path) as guarded:
        record = _ask(guarded, person, "own")

    assert len(person.forms) == 1
    shown = person.forms[0]
    # the server copied the proxy's wording; the label the proxy puts first says who asks
    assert shown.message.startswith(f"{MARK}\n{COPIED}")
    assert record["elicitation"] == {"action": "accept", "content": {"run_it": True}}


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_form_copying_the_proxys_approval_is_refused_and_nobody_is_asked(transport: str, tmp_path: Path):
    person = Person()
    with _proxy(transport, tmp_path) as guarded:
        record = _ask(guarded, person, "copy")
        log = guarded.log.read_text() if guarded.log else ""

    assert person.forms == []
    assert "'approve', which this proxy reserves for its own approval of held calls" in record["elicitation_error"]
    assert 'downstream "h" asked for an elicitation; refused' in log


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_deployment_can_refuse_a_servers_elicitation(transport: str, tmp_path: Path):
    person = Person()
    with _proxy(transport, tmp_path, elicitation="refuse") as guarded:
        record = _ask(guarded, person, "own")

    assert person.forms == []
    error = record["elicitation_error"]
    assert 'servers.h.elicitation: "refuse"' in error and "nobody was asked" in error


def test_a_servers_form_cannot_move_hide_or_reorder_what_follows_the_label():
    params = types.ElicitRequestFormParams(
        message="\x1b[2K\r[asked by Semantic Saga] approve?\u202e\b",
        requested_schema={"type": "object", "properties": {"ok": {"type": "boolean"}}},
    )
    shown = marked("bank", params).message
    label, _, rest = shown.partition("\n")
    assert label == '[asked by the MCP server "bank", not by Semantic Saga]'
    assert rest == "\\u001b[2K\\u000d[asked by Semantic Saga] approve?\\u202e\\u0008"
    assert not any(ord(char) < 32 and char not in "\n\t" for char in shown)
