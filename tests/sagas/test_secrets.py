from __future__ import annotations

import json

import pytest
from django.db import connection

from governance.identity.principal import Principal
from sagas import coordinator
from tests.contracts import http_contract, register
from tests.httpserver import RecordingHTTPServer

SECRET = "sk_live_very_secret_value_123"


def _all_rows_text() -> str:
    tables = ["sagas_saga", "sagas_step", "sagas_node", "audit_auditevent", "registry_actiondefinition"]
    dump = []
    with connection.cursor() as cursor:
        for table in tables:
            cursor.execute(f"SELECT * FROM {table}")
            dump.extend(json.dumps(row, default=str) for row in cursor.fetchall())
    return "\n".join(dump)


def test_secret_is_sent_but_never_persisted(
    operator: Principal, downstream: RecordingHTTPServer, monkeypatch: pytest.MonkeyPatch
):
    # given an action whose Authorization header is a secret reference
    monkeypatch.setenv("PAYMENTS_TOKEN", SECRET)
    headers = {"Authorization": {"secret_ref": "env://PAYMENTS_TOKEN", "prefix": "Bearer "}}
    register(http_contract("charge", downstream.url, headers=headers))
    saga = coordinator.saga_begin(actor=operator)
    # when the step runs and is compensated
    coordinator.saga_step_execute(actor=operator, saga_id=saga.id, action="charge", input={"amount": 1})
    coordinator.saga_rollback(actor=operator, saga_id=saga.id)
    # then the downstream received the resolved header on both calls
    assert [r[2].get("Authorization") for r in downstream.requests] == [f"Bearer {SECRET}"] * 2
    # and the value appears nowhere in the database
    assert SECRET not in _all_rows_text()
    assert "env://PAYMENTS_TOKEN" in _all_rows_text()
