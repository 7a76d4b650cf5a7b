"""A proxied call journaled by its intent (`proxy_call_intend`, one statement before it is sent) and recorded behind
its answer (`proxy_calls_record`): the same step, events and chain as a begin then a finish; an intent is made only
while the session is active, not a preview and not switched off; every other transaction on the session first
writes the intents it finds as their EXECUTING steps; and the recovery sweep does so with one whose proxy died, whose
outcome it then records as unknown."""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from audit.models import AuditEvent
from governance.errors import ServiceError
from governance.identity.principal import local_agent, local_principal
from governance.models import KillSwitch
from sagas.coordinator import sagas_recover
from sagas.coordinator._proxied_journal import KEPT_LEASES
from sagas.models import ProxyCallIntent, Saga, Step
from sagas.operations.invoke import invoke
from sagas.operations.table import OPERATIONS
from sagas.proxied_facts import CallOutcome, FinishedCall
from sagas.selectors import saga_verify_audit
from tests.proxy.facts import answered, call_facts, session_facts
from tests.proxy.journal_rows import step_events, step_rows

pytestmark = pytest.mark.django_db
AGENT = local_agent(protocol="test", tenant_id="acme")
OPERATOR = local_principal(protocol="test", tenant_id="acme")
WRITE = call_facts("create_contact", effect_class="unknown")


def _op(name: str, actor: Any = AGENT, **arguments: Any) -> dict[str, Any]:
    return invoke(OPERATIONS[name], actor, arguments)


def _session(**more: Any) -> str:
    return str(_op("proxy_session_open", session=session_facts(), **more)["saga_id"])


def _intend(saga_id: str, name: str, call: Any = WRITE) -> tuple[bool, str]:
    step_id = uuid.uuid4()
    answer = _op("proxy_call_intend", saga_id=saga_id, call=call, arguments={"name": name}, step_id=step_id)
    return answer["intended"], str(step_id)


def _done(step_id: str, outcome: CallOutcome) -> FinishedCall:
    return FinishedCall(step_id=step_id, fence=1, outcome=outcome)


def test_calls_recorded_on_their_intents_match_calls_begun_then_finished():
    begun_then_finished, intended = _session(), _session()
    outcomes = [answered(), CallOutcome(kind="answered", is_error=True, result={"content": []}), answered()]
    for n, outcome in enumerate(outcomes):
        begun = _op("proxy_call_begin", saga_id=begun_then_finished, call=WRITE, arguments={"name": f"c{n}"})
        step_id, fence = begun["step_id"], begun["fence"]
        _op("proxy_call_finish", saga_id=begun_then_finished, step_id=step_id, fence=fence, outcome=outcome)
    done = []
    for n, outcome in enumerate(outcomes):
        made, step_id = _intend(intended, f"c{n}")
        assert made is True
        done.append(_done(step_id, outcome))

    recorded = _op("proxy_calls_record", saga_id=intended, calls=done)

    assert recorded["statuses"] == ["COMPLETED", "FAILED", "COMPLETED"]
    assert [str(s.id) for s in Step.objects.filter(saga_id=intended)] == [d.step_id for d in done]  # ids carried
    assert step_rows(intended) == step_rows(begun_then_finished)
    assert step_events(intended) == step_events(begun_then_finished)
    assert saga_verify_audit(actor=AGENT, saga_id=intended)["valid"] is True
    assert not ProxyCallIntent.objects.exists()
    assert not {d.step_id for d in done} & {str(key) for key in KEPT_LEASES}  # their leases are no longer kept


def test_no_intent_is_made_where_the_long_way_would_not_send_the_call():
    committed, switched, preview, kept = _session(), _session(), _session(preview=True), _session()
    _op("commit_saga", OPERATOR, saga_id=committed)
    KillSwitch.objects.create(tenant_id="acme", saga_id=switched, engaged_by="op", reason="stop")

    assert _intend(committed, "a")[0] is False
    assert _intend(switched, "a")[0] is False
    assert _intend(preview, "a")[0] is False
    assert _intend(kept, "a", call_facts("send", effect_class="unknown", gate="confirm"))[0] is False
    other_tenant = local_agent(protocol="test", tenant_id="other")
    with pytest.raises(Exception):  # noqa: B017 - not its session: nothing is made, whatever the words
        made = invoke(
            OPERATIONS["proxy_call_intend"],
            other_tenant,
            {"saga_id": kept, "call": WRITE, "arguments": {}, "step_id": uuid.uuid4()},
        )
        assert made["intended"] is True
    assert not ProxyCallIntent.objects.exists() and not Step.objects.exists()


def test_any_other_transaction_on_the_session_writes_the_intents_it_finds_as_their_steps_first():
    session = _session()
    _, first = _intend(session, "first")

    later = _op("proxy_call_begin", saga_id=session, call=WRITE, arguments={"name": "later"})

    steps = list(Step.objects.filter(saga_id=session))
    assert [(str(s.id), s.status, s.input) for s in steps] == [
        (first, "EXECUTING", {"name": "first"}),  # the call sent first comes first
        (later["step_id"], "EXECUTING", {"name": "later"}),
    ]
    started = AuditEvent.objects.get(step_id=first, event_type="STEP_STARTED")
    assert started.actor_principal_id == AGENT.principal_id  # the agent who made the call, whoever wrote the step
    assert not ProxyCallIntent.objects.exists()
    # the outcome recorded afterwards finishes the step as written
    assert _op("proxy_calls_record", saga_id=session, calls=[_done(first, answered())])["statuses"] == ["COMPLETED"]
    _op("proxy_call_finish", saga_id=session, step_id=later["step_id"], fence=later["fence"], outcome=answered())


def test_a_commit_sees_a_call_still_out_on_its_intent():
    session = _session()
    _, step_id = _intend(session, "out")

    with pytest.raises(ServiceError) as refused:
        _op("commit_saga", OPERATOR, saga_id=session)
    assert refused.value.code == "UNFINISHED_STEPS"  # the call sent on its intent counts, though no step was written

    assert _op("proxy_calls_record", saga_id=session, calls=[_done(step_id, answered())])["statuses"] == ["COMPLETED"]
    assert _op("commit_saga", OPERATOR, saga_id=session)["status"] == "COMMITTED"


def test_the_sweep_records_an_intent_whose_proxy_died_as_a_call_with_an_unknown_outcome():
    session = _session()
    _, step_id = _intend(session, "lost")
    KEPT_LEASES.pop(uuid.UUID(step_id))  # the proxy that made it is gone: nobody renews its lease
    lapsed = timezone.now() - timedelta(minutes=1)  # well past: SQLite's clock in SQL counts milliseconds
    ProxyCallIntent.objects.filter(pk=step_id).update(lease_expires_at=lapsed)

    report = sagas_recover()

    step = Step.objects.get(pk=step_id)
    assert report.steps_recovered == 1
    assert step.status == "FAILED" and step.uncertain_outcome and step.error["code"] == "WORKER_LOST"
    assert Saga.objects.get(pk=session).status == "RECOVERY_REQUIRED"
    assert not ProxyCallIntent.objects.exists()
    assert saga_verify_audit(actor=AGENT, saga_id=session)["valid"] is True
    assert sagas_recover().steps_recovered == 0


def test_an_undo_asked_while_a_call_is_out_on_its_intent_changes_nothing():
    session = _session()
    _, step_id = _intend(session, "out")

    with pytest.raises(ServiceError) as busy:
        _op("proxy_session_undo", OPERATOR, saga_id=session)

    assert busy.value.code == "UNDO_BUSY"  # the call sent on its intent is in flight, though no step is written yet
    assert Saga.objects.get(pk=session).status == "ACTIVE"
    _op("proxy_calls_record", saga_id=session, calls=[_done(step_id, answered())])


def test_no_intent_is_made_in_a_saga_that_is_not_a_proxy_session():
    plain = _op("begin_saga")["id"]

    assert _intend(str(plain), "a")[0] is False
    assert not ProxyCallIntent.objects.exists()


def test_the_ledger_and_status_show_a_call_out_on_its_intent_as_executing():
    from sagas.selectors.proxy_ledger import ledger_rows
    from sagas.selectors.proxy_session_lines import lines_of

    session = _session()
    _, step_id = _intend(session, "out")
    saga = Saga.objects.get(pk=session)

    rows = ledger_rows(actor=OPERATOR, saga=saga)

    assert [(row.id, row.tool, row.status, row.arguments) for row in rows] == [
        (step_id, "create_contact", "executing", {"name": "out"})
    ]
    assert rows[0].as_json()["undo_plan"]["verdict"] == "skipped"
    line = lines_of([saga])[0]
    assert (line.calls, line.by_status) == (1, {"executing": 1})
    _op("proxy_calls_record", saga_id=session, calls=[_done(step_id, answered())])  # its lease kept no longer


@pytest.mark.django_db(transaction=True)
def test_an_intent_made_while_another_party_ends_the_session_waits_for_it_and_is_not_made():
    import threading

    from django.db import connections

    from audit.models import EventType
    from sagas.coordinator._tx import locked_saga

    session = _session()
    holding, release = threading.Event(), threading.Event()

    def operator_commits() -> None:  # a transaction that is not the proxy's own, ending the session
        try:
            with locked_saga(session, OPERATOR) as tx:
                tx.transition(tx.saga, "COMMITTED", event=EventType.SAGA_COMMITTED, error=None)
                holding.set()
                release.wait(10)  # still holding the session when the agent's call is journaled
        finally:
            connections.close_all()

    operator = threading.Thread(target=operator_commits)
    operator.start()
    assert holding.wait(10)
    threading.Timer(0.3, release.set).start()  # the intent below waits for this commit (else it sees ACTIVE)
    try:
        made, _ = _intend(session, "late")
    finally:
        release.set()
        operator.join(10)

    assert made is False  # nothing is sent in a session ended while the call was being journaled
    assert not ProxyCallIntent.objects.exists()
    assert Saga.objects.get(pk=session).status == "COMMITTED"
