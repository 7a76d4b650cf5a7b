"""A forwarded call's outcome recorded in the transaction that begins its session's next call (`proxy_call_begin`'s
`finished`, the fast path's group commit): the same rows and events as a finish followed by a begin, all or nothing,
and when the begin fails the outcomes are still recorded on their own (sagas.protocols.proxy.pending_finishes)."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from django.db import IntegrityError

from governance.identity.principal import local_agent
from sagas.coordinator._proxied_journal import KEPT_LEASES
from sagas.models import Step
from sagas.operations.invoke import invoke
from sagas.operations.table import OPERATIONS
from sagas.protocols.proxy.pending_finishes import begin_folding
from sagas.proxied_facts import CallOutcome, FinishedCall
from sagas.selectors import saga_verify_audit
from tests.proxy.facts import answered, call_facts, session_facts

pytestmark = pytest.mark.django_db
AGENT = local_agent(protocol="test", tenant_id="acme")
WRITE = call_facts("create_contact", effect_class="unknown")


def _op(name: str, actor: Any = AGENT, **arguments: Any) -> dict[str, Any]:
    return invoke(OPERATIONS[name], actor, arguments)


def _session() -> str:
    return str(_op("proxy_session_open", session=session_facts())["saga_id"])


def _begin(saga_id: str, name: str, **more: Any) -> dict[str, Any]:
    return _op("proxy_call_begin", saga_id=saga_id, call=WRITE, arguments={"name": name}, **more)


def _done(begun: dict[str, Any], outcome: CallOutcome) -> FinishedCall:
    return FinishedCall(step_id=begun["step_id"], fence=begun["fence"], outcome=outcome)


def _journal(saga_id: str) -> tuple[list[tuple[Any, ...]], list[str]]:
    steps = Step.objects.filter(saga_id=saga_id).order_by("sequence")
    rows = [
        (s.sequence, s.status, s.uncertain_outcome, s.lease_owner, s.input, (s.error or {}).get("code")) for s in steps
    ]
    events = [e.event_type for e in _events(saga_id)]
    return rows, events


def _events(saga_id: str) -> list[Any]:
    from audit.models import AuditEvent

    return list(AuditEvent.objects.filter(saga_id=saga_id).order_by("sequence"))


def test_outcomes_folded_into_the_next_begin_match_a_finish_then_a_begin():
    apart, folded = _session(), _session()
    outcomes = [answered(), CallOutcome(kind="answered", is_error=True, result={"content": []}), answered()]
    previous = _begin(apart, "a0")
    for n, outcome in enumerate(outcomes, start=1):
        _op("proxy_call_finish", saga_id=apart, step_id=previous["step_id"], fence=previous["fence"], outcome=outcome)
        previous = _begin(apart, f"a{n}")
    previous = _begin(folded, "a0")
    for n, outcome in enumerate(outcomes, start=1):
        previous = _begin(folded, f"a{n}", finished=[_done(previous, outcome)])

    assert _journal(folded) == _journal(apart)
    assert saga_verify_audit(actor=AGENT, saga_id=folded)["valid"] is True
    finished_ids = {str(s.id) for s in Step.objects.filter(saga_id=folded).exclude(status="EXECUTING")}
    assert not finished_ids & {str(key) for key in KEPT_LEASES}  # their leases are no longer kept alive


def test_a_begin_that_fails_writes_none_of_the_outcomes_it_carried():
    session = _session()
    first = _begin(session, "first")

    with pytest.raises(IntegrityError):  # a step id already taken: the transaction fails after the outcome's writes
        _begin(session, "second", step_id=uuid.UUID(first["step_id"]), finished=[_done(first, answered())])

    assert Step.objects.get(pk=first["step_id"]).status == "EXECUTING"  # rolled back with the failed begin
    assert [e.event_type for e in _events(session)].count("STEP_COMPLETED") == 0


def test_begin_folding_records_the_outcomes_on_their_own_when_the_begin_fails():
    session = _session()
    first = _begin(session, "first")
    arguments = {
        "saga_id": session,
        "call": WRITE,
        "arguments": {"name": "second"},
        "step_id": uuid.UUID(first["step_id"]),
    }

    with pytest.raises(IntegrityError):  # the begin's own error, as it was
        begin_folding(AGENT, arguments, [_done(first, answered())])

    assert Step.objects.get(pk=first["step_id"]).status == "COMPLETED"
    assert Step.objects.filter(saga_id=session).count() == 1


def test_a_faulty_outcome_never_refuses_the_next_call():
    session = _session()
    first = _begin(session, "first")
    stale = FinishedCall(step_id=first["step_id"], fence=first["fence"] + 7, outcome=answered())
    missing = FinishedCall(step_id="00000000-0000-4000-8000-000000000000", fence=1, outcome=answered())
    arguments = {"saga_id": session, "call": WRITE, "arguments": {"name": "second"}}

    begun = begin_folding(AGENT, arguments, [stale, missing])

    assert begun["outcome"] == "forward"
    events = [e.event_type for e in _events(session)]
    assert "STALE_WRITE_REFUSED" in events  # the fenced outcome is evidence, not state
    assert Step.objects.get(pk=first["step_id"]).status == "EXECUTING"
