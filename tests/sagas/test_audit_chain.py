from __future__ import annotations

import json

from audit.chain import verify_chain
from audit.models import AuditEvent
from governance.identity.principal import Principal
from sagas import coordinator
from tests.contracts import http_contract, register
from tests.httpserver import RecordingHTTPServer


def _saga_with_history(operator: Principal, downstream: RecordingHTTPServer) -> object:
    register(http_contract("charge", downstream.url))
    saga = coordinator.saga_begin(actor=operator)
    coordinator.saga_step_execute(actor=operator, saga_id=saga.id, action="charge", input={"card": "4242-SECRET"})
    coordinator.saga_checkpoint(actor=operator, saga_id=saga.id, name="paid", data={"pin": "PIN-SECRET"})
    coordinator.saga_rollback(actor=operator, saga_id=saga.id)
    return saga.id


def test_chain_verifies_over_a_whole_saga(operator: Principal, downstream: RecordingHTTPServer):
    saga_id = _saga_with_history(operator, downstream)
    result = verify_chain(saga_id)
    assert result.valid and result.events_checked == AuditEvent.objects.filter(saga_id=saga_id).count()
    last = AuditEvent.objects.filter(saga_id=saga_id).order_by("-sequence").first()
    assert result.head_hash == last.event_hash


def test_modified_row_is_detected(operator: Principal, downstream: RecordingHTTPServer):
    saga_id = _saga_with_history(operator, downstream)
    AuditEvent.objects.filter(saga_id=saga_id, sequence=3).update(status="COMPLETED-EDITED")
    result = verify_chain(saga_id)
    assert not result.valid and result.failed_sequence == 3


def test_deleted_middle_row_is_detected(operator: Principal, downstream: RecordingHTTPServer):
    saga_id = _saga_with_history(operator, downstream)
    AuditEvent.objects.filter(saga_id=saga_id, sequence=2).delete()
    result = verify_chain(saga_id)
    assert not result.valid and result.failed_sequence == 2


def test_audit_rows_are_payload_free(operator: Principal, downstream: RecordingHTTPServer):
    saga_id = _saga_with_history(operator, downstream)
    dumped = json.dumps([e.data for e in AuditEvent.objects.filter(saga_id=saga_id)])
    assert "4242-SECRET" not in dumped and "PIN-SECRET" not in dumped
