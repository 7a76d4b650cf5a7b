"""A proxy session run dry, made through the coordinator as the proxy makes it (no downstream is needed: in
preview nothing is sent but the reads, whose answers are recorded here), and what its preview report says.

The same session as tests/proxy/test_preview_report.py drives through the real proxy and the demo world: two reads,
create_contact (R, with a declared inverse), update_contact (unknown, held by policy there and by the gate here),
delete_contact (unknown), send_email (C), post_tweet (C, gate block) and transfer_funds (I, gate confirm).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from governance.identity.principal import local_principal
from sagas import coordinator
from sagas.models import Saga
from sagas.proxied_facts import CallFacts
from tests.proxy.facts import answered, call_facts, session_facts

ACTOR = local_principal(protocol="test", tenant_id="acme")
GROUPS = [
    ("I", 1, ["demo/transfer_funds"]),
    ("unknown", 2, ["demo/delete_contact", "demo/update_contact"]),
    ("C", 2, ["demo/post_tweet", "demo/send_email"]),
    ("R", 1, ["demo/create_contact"]),
    ("read", 2, ["demo/list_contacts", "demo/list_timeline"]),
]
GATE_COUNTS = [
    {"allow": 0, "confirm": 1, "block": 0},
    {"allow": 1, "confirm": 1, "block": 0},
    {"allow": 1, "confirm": 0, "block": 1},
    {"allow": 1, "confirm": 0, "block": 0},
    {"allow": 2, "confirm": 0, "block": 0},
]
PLAN = [
    ("transfer_funds", "no way back", "irreversible once executed"),
    ("post_tweet", "decision", "an operator must decide: it cannot be undone, only corrected afterwards"),
    ("send_email", "decision", "an operator must decide: it cannot be undone, only corrected afterwards"),
    ("delete_contact", "no way back", "nothing says how it could be undone (class unknown)"),
    ("update_contact", "no way back", "nothing says how it could be undone (class unknown)"),
    ("create_contact", "inverse", "runs its declared inverse demo/delete_contact"),
]
_INVERSE = {"compensation": {"tool": "delete_contact", "arguments": {"id": "${result.id}"}}}
# (tool, class, class source, gate, gate reason, arguments)
CALLS: list[tuple[str, str, str, str, str, dict[str, Any]]] = [
    ("list_contacts", "read", "annotation", "allow", "", {}),
    ("list_timeline", "read", "annotation", "allow", "", {"limit": 5}),
    ("create_contact", "R", "pack", "allow", "", {"name": "Margaret Hamilton", "email": "mh@example.com"}),
    ("update_contact", "unknown", "heuristic", "confirm", "crm edits are read first", {"id": "c-1"}),
    ("delete_contact", "unknown", "heuristic", "allow", "", {"id": "c-3"}),
    ("send_email", "C", "heuristic", "allow", "", {"to": "ada@example.com", "subject": "Hello"}),
    ("post_tweet", "C", "heuristic", "block", "no tweets today", {"text": "Margaret joined the CRM"}),
    ("transfer_funds", "I", "heuristic", "confirm", "class I; default policy: class I -> confirm", {"amount": 1}),
]


def dry_proxy_session() -> Saga:
    """Open a preview proxy session of acme and make CALLS in it: the reads are forwarded (answered here)."""
    session = coordinator.proxy_session_open(actor=ACTOR, session=session_facts("preview-test"), preview=True)
    for tool, effect_class, source, gate, reason, arguments in CALLS:
        call = _call(tool, effect_class, source, gate, reason)
        begun = coordinator.proxy_call_begin(actor=ACTOR, saga_id=session.id, call=call, arguments=arguments)
        if begun.outcome == "forward":
            answer = answered(result={"structuredContent": {"items": []}}, duration_ms=3.0)
            coordinator.proxy_call_finish(
                actor=ACTOR, saga_id=session.id, step_id=begun.step_id, fence=begun.fence, outcome=answer
            )
    return session


def _call(tool: str, effect_class: str, source: str, gate: str, reason: str) -> CallFacts:
    return call_facts(
        tool,
        effect_class=effect_class,
        gate=gate,
        class_source=source,
        gate_source="tool" if reason else "default",
        gate_reason=reason,
        inverse=_INVERSE if effect_class == "R" else {},
        inverse_source="pack" if effect_class == "R" else "",
    )


def policy_holding(directory: Path, settings: Any, action: str) -> None:
    """A JSON tenant policy for acme whose rule `crm-edits` requires approval for `action`."""
    rule = {"id": "crm-edits", "effect": "require_approval", "match": {"actions": [action]}}
    document = {
        "schema_version": 1,
        "revision": "preview-test",
        "default_effect": "allow",
        "tenants": {"acme": {"rules": [rule]}},
    }
    path = directory / "policy.json"
    path.write_text(json.dumps(document))
    settings.SAGA_POLICY_MODE = "json"
    settings.SAGA_POLICY_FILE = str(path)
