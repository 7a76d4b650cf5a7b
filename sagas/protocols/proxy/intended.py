"""Calls sent on an intent: the fast path's write-ahead (over stdio and HTTP) for a plain call the gate allows while
no tenant policy is configured (docs/proxy.md, "Writes journaled by an intent").

Such a call's outcome is decided before it is journaled: the gate allows it, no policy can hold or refuse it, so
only the session's state and the kill switches are left, and the intent's one INSERT checks both
(sagas.coordinator.proxy.intents). So the proxy journals the intent (its own commit, on a journal thread), sends the
call once it is durable, with the step id as idempotency key, and hands the outcome to the write-behind thread, which
writes the step and its events with it (`proxy_calls_record`). An intent the coordinator does not make (the session
ended, a switch engaged) sends nothing: the call is begun the long way, which decides again and journals why.
"""

from __future__ import annotations

import uuid
from typing import Any

from django.conf import settings

from governance.policy.engine import BACKEND_NONE
from sagas.protocols.proxy.behind import CallLine, finished_call, now
from sagas.protocols.proxy.calls import ProxiedCall
from sagas.protocols.proxy.durable import DurableCallPath, Forward, Sent
from sagas.proxied_facts import CallFacts


def may_intend(facts: CallFacts) -> bool:
    """Whether the call may be journaled by an intent: gate allow, a tools/call, no tenant policy configured (its
    decision is audited with the step, so such calls are begun the long way). Read from the settings alone: asking
    the policy engine loads and records its revision, which is database work this event loop must not do (the
    coordinator asks it again, on a journal thread)."""
    return facts.gate == "allow" and not facts.method and settings.SAGA_POLICY_MODE == BACKEND_NONE


async def forward_intended(
    path: DurableCallPath, request: ProxiedCall, facts: CallFacts, forward: Forward[Sent]
) -> Sent | None:
    """The call journaled by its intent, sent and answered (its outcome written behind); None when the intent was
    not made (nothing was sent: begin the call the long way)."""
    principal, client = request.principal, request.client
    session = path.known_session(principal, client) or await path._session(principal, client)
    step_id = uuid.uuid4()  # the step's id, and so the call's idempotency key, before it is journaled
    if not await path.journaling.intend(principal, session.saga_id, facts, request.arguments, step_id):
        return None
    begun = {"saga_id": session.saga_id, "step_id": str(step_id), "fence": 1}

    async def record(started: float, outcome: dict[str, Any]) -> None:
        done = finished_call(begun, outcome, started, now())
        path.behind.submit(CallLine(principal, session.saga_id, done))

    return await forward(request, begun, record)
