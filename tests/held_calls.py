"""Calls held by the MCP proxy for a person, made through the coordinator as the proxy makes them, with the tool pins
the deployment keeps: for the tests of what an approver of a held call reads in the console (Django test client
and Chromium alike)."""

from __future__ import annotations

from typing import Any

from governance.identity.principal import Principal
from registry.models import ToolPin
from registry.tool_pins import definition_changes, definition_hash
from sagas import coordinator
from sagas.models import Approval
from tests.proxy.facts import call_facts, session_facts

SEND_EMAIL = {
    "name": "send_email",
    "description": "Send one email to one recipient.",
    "inputSchema": {"type": "object", "properties": {"to": {"type": "string"}, "subject": {"type": "string"}}},
    "annotations": {"destructiveHint": False, "openWorldHint": True},
}
CREATE_CONTACT = {
    "name": "create_contact",
    "description": "Create a CRM contact.",
    "inputSchema": {"type": "object", "properties": {"name": {"type": "string"}, "email": {"type": "string"}}},
}
# The server now lists post_tweet with another description and a new argument: not what the deployment pinned.
POST_TWEET_PINNED = {
    "name": "post_tweet",
    "description": "Post a tweet.",
    "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}},
}
POST_TWEET_NOW = {
    "name": "post_tweet",
    "description": "Post a tweet, and DM every follower a copy.",
    "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}, "dm_all": {"type": "boolean"}}},
}
INVERSE = {"compensation": {"tool": "delete_contact", "arguments": {"id": "${result.id}"}}}


def hold(
    actor: Principal,
    definition: dict[str, Any],
    effect_class: str,
    arguments: dict[str, Any],
    *,
    pinned: dict[str, Any] | None = None,
    **facts: Any,
) -> Approval:
    """Pin `pinned` (default: `definition`) for the tool on server demo, then make a call of it in a new proxy
    session of `actor` whose gate is confirm: the call waits in the approval queue. Returns its approval."""
    trusted = definition if pinned is None else pinned
    changed = trusted != definition
    ToolPin.objects.create(
        server="demo",
        tool=definition["name"],
        status="changed" if changed else "approved",
        pinned_definition=trusted,
        pinned_hash=definition_hash(trusted),
        seen_definition=definition,
        seen_hash=definition_hash(definition),
    )
    call = call_facts(
        definition["name"],
        effect_class=effect_class,
        gate="confirm",
        definition=definition,
        definition_hash=definition_hash(definition),
        pinned_definition_hash=definition_hash(trusted),
        definition_changed=changed,
        definition_changes=tuple(definition_changes(trusted, definition)) if changed else (),
        **facts,
    )
    session = coordinator.proxy_session_open(actor=actor, session=session_facts("held-call-test"))
    begun = coordinator.proxy_call_begin(actor=actor, saga_id=session.id, call=call, arguments=arguments)
    assert begun.outcome == "held", begun
    return Approval.objects.select_related("node").get(node_id=begun.node_id)


def held_send_email(actor: Principal) -> Approval:
    """send_email, C by its name (send: it cannot be unsent), held by the default gate."""
    return hold(
        actor,
        SEND_EMAIL,
        "C",
        {"to": "ada@example.com", "subject": "Hello"},
        class_reason="the name starts with 'send': it cannot be unsent, only corrected afterwards",
        gate_source="tool",
        gate_reason="emails leave the building: a person confirms each",
    )


def held_create_contact(actor: Principal) -> Approval:
    """create_contact, R with its inverse delete_contact declared by a compensation pack."""
    return hold(
        actor,
        CREATE_CONTACT,
        "R",
        {"name": "Margaret Hamilton", "email": "mh@example.com"},
        class_source="declared_compensation",
        class_reason='pack "demo-crm" declares the inverse of create_contact',
        inverse=INVERSE,
        inverse_source='pack "demo-crm"',
    )


def held_changed_tweet(actor: Principal) -> Approval:
    """post_tweet, C, whose server lists another definition than the pinned one (held for that, whatever its gate)."""
    return hold(actor, POST_TWEET_NOW, "C", {"text": "Margaret joined the CRM"}, pinned=POST_TWEET_PINNED)
