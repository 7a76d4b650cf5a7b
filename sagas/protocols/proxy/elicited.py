"""Asking the person at the agent's client to decide a held call: MCP elicitation in form mode.

The client application shows the form to its user; the model never sees it, so it is a channel the agent does not
drive (the agent cannot approve what it asked for by saying so). Whether a held call asks its client is the gate
rule's `approver` (or `policy.approver`): `operators` (never), `client` (only the client; operators are not
asked), `both` (the first decision wins). By default over stdio, where the client's user is this machine's, both;
over HTTP, where the person at the client is the calling principal itself, operators only. A client that did not
declare the elicitation capability, or a call held as an MCP task, is decided by operators.

How the form reaches the client depends on the protocol era:
- 2025-11-25: an `elicitation/create` request on the held tools/call's own stream, while the call is held open
  (DurableCallPath._hold); an operator deciding first cancels the form.
- 2026-07-28: the tools/call is answered `input_required` with the form in `inputRequests` and a `requestState`
  signed for this principal (django.core.signing, SECRET_KEY); the client asks its user and calls again with the
  answer, and that second request carries the call to its end.

An answer is a decision only when it says so: accept with `approve: true` approves, accept with `approve: false`
or decline denies; cancel (the form dismissed) decides nothing and the call goes on waiting for the operators.
"""

from __future__ import annotations

import json
from typing import Any

import mcp.types as types
from django.core import signing
from mcp.shared.exceptions import MCPError
from mcp_types.jsonrpc import INVALID_PARAMS

from governance.identity.principal import Principal
from sagas.protocols.proxy.calls import ProxiedCall
from sagas.proxied_facts import CallFacts

INPUT_KEY = "approval"
_SALT = "semantic-saga.proxy.held-call"
VALUE_SHOWN = 500
MEANING = {
    "read": "it only reads; it changes nothing",
    "R": "reversible: an undo runs its declared inverse",
    "C": "it cannot be undone, only corrected afterwards (like an email sent)",
    "I": "irreversible: there is no way back once it ran (like money moved)",
    "unknown": "nobody knows what it changes: treat it as irreversible",
}
SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "approve": {
            "type": "boolean",
            "title": "Run this call",
            "description": "Check to run it now exactly as shown; leave unchecked (or decline) to refuse it.",
            "default": False,
        }
    },
    "required": ["approve"],
}


def default_approvers(served_over: str) -> str:
    return "both" if served_over == "stdio" else "operators"


def can_ask(capabilities: types.ClientCapabilities | None) -> bool:
    return capabilities is not None and capabilities.elicitation is not None


def approval_form(request: ProxiedCall, facts: CallFacts) -> types.ElicitRequestFormParams:
    """The form the person at the client decides on: what would run, where, its class and what undo could do."""
    lines = [
        f'An AI agent asks to run "{request.exposed_name}" on the MCP server "{facts.server}".',
        f"Class {facts.effect_class}: {MEANING.get(facts.effect_class, MEANING['unknown'])}.",
        f"Held because: {facts.gate_reason}",
    ]
    if facts.definition_changed:
        lines.append("The tool's definition is not the one this deployment trusts:")
        lines += [f"  {change}" for change in facts.definition_changes]
    lines.append("With these arguments (every one, each value clipped past a bound that is said):")
    for key, value in sorted(request.arguments.items()):
        text = json.dumps(value, ensure_ascii=False, sort_keys=True)
        if len(text) > VALUE_SHOWN:
            text = f"{text[:VALUE_SHOWN]}... [{len(text) - VALUE_SHOWN} more characters]"
        lines.append(f"  {key}: {text}")
    return types.ElicitRequestFormParams(message="\n".join(lines), requested_schema=SCHEMA)


def verdict(answer: types.ElicitResult | types.ErrorData | None) -> bool | None:
    """True approves, False denies, None decides nothing (dismissed, unanswerable, or not an answer to the form)."""
    if not isinstance(answer, types.ElicitResult):
        return None
    if answer.action == "decline":
        return False
    if answer.action == "accept" and isinstance(answer.content, dict):
        approve = answer.content.get("approve")
        return approve if isinstance(approve, bool) else None
    return None


def input_required(request: ProxiedCall, facts: CallFacts, begun: dict[str, Any]) -> types.InputRequiredResult:
    """The 2026-07-28 answer to a held call whose client is asked: the form, and the state to come back with."""
    state = {"s": begun["saga_id"], "n": begun["node_id"], "t": request.principal.tenant_id}
    state["p"] = request.principal.principal_id
    form = types.ElicitRequest(params=approval_form(request, facts))
    return types.InputRequiredResult(
        input_requests={INPUT_KEY: form}, request_state=signing.dumps(state, salt=_SALT, compress=True)
    )


def held_call_of(request_state: str, principal: Principal, max_age: int) -> dict[str, str]:
    """{"saga_id", "node_id"} of the held call a `requestState` names, if this proxy issued it to this principal
    within `max_age` seconds; a -32602 error otherwise."""
    try:
        state = signing.loads(request_state, salt=_SALT, max_age=max_age)
    except signing.BadSignature:  # SignatureExpired included
        raise MCPError(
            INVALID_PARAMS,
            "The requestState of this tools/call was not issued by this proxy, or is too old; call the tool again "
            "without it.",
        ) from None
    if (state.get("t"), state.get("p")) != (principal.tenant_id, principal.principal_id):
        raise MCPError(INVALID_PARAMS, "The requestState of this tools/call was issued to another principal.")
    return {"saga_id": str(state["s"]), "node_id": str(state["n"])}


def answer_in(request: ProxiedCall) -> types.ElicitResult | None:
    """The person's answer among a retried call's inputResponses."""
    answer = (request.input_responses or {}).get(INPUT_KEY)
    return answer if isinstance(answer, types.ElicitResult) else None
