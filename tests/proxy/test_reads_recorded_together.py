"""Reads journaled behind their answers are written several to a transaction (`proxy_reads_record`, the write-behind
thread's batch): each gets the step, the events and the chain links that one `proxy_call_begin` and one
`proxy_call_finish` give it, in the order the reads were sent; a session that is no longer active takes none."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from audit.models import AuditEvent
from governance.errors import ServiceError
from governance.identity.principal import local_agent, local_principal
from sagas.models import Step
from sagas.operations.invoke import invoke
from sagas.operations.table import OPERATIONS
from sagas.proxied_facts import BehindRead, CallOutcome
from sagas.selectors import saga_verify_audit
from tests.proxy.facts import answered, call_facts, session_facts
from tests.proxy.journal_rows import step_events, step_rows

pytestmark = pytest.mark.django_db
AGENT = local_agent(protocol="test", tenant_id="acme")
OPERATOR = local_principal(protocol="test", tenant_id="acme")


def _op(name: str, actor: Any = AGENT, **arguments: Any) -> dict[str, Any]:
    return invoke(OPERATIONS[name], actor, arguments)


def _session() -> str:
    return str(_op("proxy_session_open", session=session_facts())["saga_id"])


def _read(tool: str, outcome: CallOutcome) -> BehindRead:
    return BehindRead(call=call_facts(tool), arguments={"q": tool}, step_id=str(uuid.uuid4()), outcome=outcome)


def _events(saga_id: str) -> list[tuple[str, str]]:
    rows = AuditEvent.objects.filter(saga_id=saga_id).order_by("sequence")
    return [(row.event_type, row.step_id) for row in rows if row.step_id]


def test_reads_written_together_match_reads_written_one_by_one():
    one_by_one, together = _session(), _session()
    reads = [
        _read("list_a", answered()),
        _read("list_b", CallOutcome(kind="lost", reason="gone")),
        _read("list_c", answered()),
    ]
    for read in reads:
        begun = _op(
            "proxy_call_begin", saga_id=one_by_one, call=read.call, arguments=read.arguments, step_id=uuid.uuid4()
        )
        _op(
            "proxy_call_finish",
            saga_id=one_by_one,
            step_id=begun["step_id"],
            fence=begun["fence"],
            outcome=read.outcome,
        )

    recorded = _op("proxy_reads_record", saga_id=together, reads=reads)

    assert [b["outcome"] for b in recorded["begun"]] == ["forward"] * 3
    assert [b["step_id"] for b in recorded["begun"]] == [read.step_id for read in reads]  # the ids they carried

    assert step_rows(together) == step_rows(one_by_one)  # written once, as a begin then a finish leave it
    assert step_events(together) == step_events(one_by_one)
    assert [step for _, step in _events(together)] == [r.step_id for r in reads for _ in (1, 2)]
    assert saga_verify_audit(actor=AGENT, saga_id=together)["valid"] is True


def test_a_session_no_longer_active_takes_none_of_the_reads():
    session = _session()
    _op("commit_saga", OPERATOR, saga_id=session)

    with pytest.raises(ServiceError) as refused:
        _op("proxy_reads_record", saga_id=session, reads=[_read("list_a", answered())])

    assert refused.value.code == "PROXY_SESSION_NOT_ACTIVE"
    assert not Step.objects.filter(saga_id=session).exists()
