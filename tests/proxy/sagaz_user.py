"""What the tests of Sagaz's verbs share: `semantic-saga` run as a Sagaz user's script runs it (a subprocess on
pipes, NO_COLOR set, acting in tenant acme), and proxy sessions made through the coordinator as the proxy makes them
(no downstream needed: the answers are given here)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from governance.identity.principal import local_agent
from sagas import coordinator
from sagas.models import Node, Saga
from sagas.proxied_facts import CallOutcome
from tests.distributed.workers import shared_database_url
from tests.proxy.facts import call_facts, session_facts

ROOT = Path(__file__).resolve().parents[2]
SEMANTIC_SAGA = str(Path(sys.executable).parent / "semantic-saga")
WAIT_SECONDS = 60
AGENT = local_agent("mcp-proxy-stdio", "acme")
# (tool, class, arguments, what the downstream answered, the capture read's answer or None)
LIVE_CALLS: list[tuple[str, str, dict[str, Any], dict[str, Any], Any]] = [
    ("list_contacts", "read", {}, {"structuredContent": {"items": [{"id": "c-1"}]}}, None),
    ("create_contact", "R", {"name": "Ada"}, {"structuredContent": {"id": "c-9", "name": "Ada"}}, None),
    (
        "update_contact",
        "R",
        {"id": "c-1", "email": "new@example.com"},
        {"structuredContent": {"id": "c-1", "email": "new@example.com"}},
        {"id": "c-1", "email": "old@example.com"},
    ),
    ("send_email", "C", {"to": "ada@example.com"}, {"structuredContent": {"sent": True}}, None),
]


def env(**more: str | None) -> dict[str, str]:
    """The test database, tenant acme, NO_COLOR; `more` sets variables (None removes one)."""
    out = {**os.environ, "DATABASE_URL": shared_database_url(), "SAGA_DEFAULT_TENANT": "acme", "NO_COLOR": "1"}
    for name, value in more.items():
        if value is None:
            out.pop(name, None)
        else:
            out[name] = value
    return out


def cli(*args: str, **environment: str | None) -> subprocess.CompletedProcess[str]:
    """`semantic-saga ARGS` with its output on pipes, as a script reads it (`environment`: see env)."""
    return subprocess.run(
        [SEMANTIC_SAGA, *args], env=env(**environment), cwd=ROOT, capture_output=True, text=True, timeout=WAIT_SECONDS
    )


def live_session(
    calls: list[tuple[str, str, dict[str, Any], dict[str, Any], Any]] = LIVE_CALLS, **outcome: Any
) -> Saga:
    """A proxy session of acme whose calls ran and were answered (`outcome` adds CallOutcome fields to each)."""
    session = coordinator.proxy_session_open(actor=AGENT, session=session_facts("sagaz-user"))
    for tool, effect_class, arguments, answer, pre_state in calls:
        call = call_facts(tool, effect_class=effect_class, class_source="rule", class_reason=f"{tool}: a rule says so")
        begun = coordinator.proxy_call_begin(actor=AGENT, saga_id=session.id, call=call, arguments=arguments)
        done = CallOutcome(
            kind="answered",
            result=answer,
            duration_ms=2.0,
            captured=pre_state is not None,
            pre_state=pre_state,
            **outcome,
        )
        coordinator.proxy_call_finish(
            actor=AGENT, saga_id=session.id, step_id=begun.step_id, fence=begun.fence, outcome=done
        )
    return session


def held_call(tool: str = "transfer_funds", **arguments: Any) -> Node:
    """A call the proxy holds for a person (class I, gate confirm), in a session of its own."""
    session = coordinator.proxy_session_open(actor=AGENT, session=session_facts("sagaz-user"))
    call = call_facts(tool, effect_class="I", gate="confirm")
    begun = coordinator.proxy_call_begin(actor=AGENT, saga_id=session.id, call=call, arguments=arguments)
    return Node.objects.get(pk=begun.node_id)
