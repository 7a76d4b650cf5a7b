"""Proxied-call facts for tests that drive the coordinator directly, as the proxy would send them."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from sagas.proxied_facts import CallFacts, CallOutcome, ClientInfo, SessionFacts

SERVER_BLOCK = {"transport": "streamable_http", "url": "http://127.0.0.1:9/mcp"}


def call_facts(tool: str, *, effect_class: str = "read", gate: str = "allow", **more: Any) -> CallFacts:
    """A call's facts. A held one waits as a task would (`held_as="task"`): no process of the test keeps a lease
    on it."""
    definition = more.pop("definition", {"name": tool, "inputSchema": {"type": "object"}})
    digest = hashlib.sha256(json.dumps(definition, sort_keys=True).encode()).hexdigest()
    fields: dict[str, Any] = {
        "server": "demo",
        "tool": tool,
        "exposed_name": tool,
        "server_block": SERVER_BLOCK,
        "definition": definition,
        "definition_hash": digest,
        "pinned_definition_hash": digest,
        "effect_class": effect_class,
        "class_source": "heuristic",
        "class_reason": f"{tool} is {effect_class} for this test",
        "gate": gate,
        "gate_source": "default",
        "gate_reason": "",
        "held_as": "task",
        **more,
    }
    return CallFacts(**fields)


def session_facts(name: str = "t") -> SessionFacts:
    return SessionFacts(client=ClientInfo(name=name))


def answered(**fields: Any) -> CallOutcome:
    return CallOutcome(kind="answered", **{"result": {"structuredContent": {}}, **fields})
