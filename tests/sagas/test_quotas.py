"""Quotas, off unless configured: SAGA_MAX_NEW_SAGAS_PER_MINUTE refuses a principal's next saga before anything is
written (and counts per principal, not per tenant); SAGA_MAX_CONCURRENT_RUNS_PER_TENANT refuses a run while that many
other sagas of the tenant have a node running. Both answer QUOTA_EXCEEDED, which REST maps to 429."""

from __future__ import annotations

import pytest
from django.test import override_settings

from audit.models import AuditEvent
from governance.identity.principal import Principal
from sagas import coordinator
from sagas.api.errors import status_for
from sagas.errors import QuotaExceeded
from sagas.models import Node, Saga
from sagas.states import NodeStatus
from tests.conftest import make_principal
from tests.contracts import http_contract, register
from tests.httpserver import RecordingHTTPServer
from tests.startup import refused_at_start_up


@override_settings(SAGA_MAX_NEW_SAGAS_PER_MINUTE=3)
def test_a_principal_past_its_saga_rate_is_refused_and_nothing_is_written(operator: Principal):
    for _ in range(3):
        coordinator.saga_begin(actor=operator)
    sagas, events = Saga.objects.count(), AuditEvent.objects.count()

    with pytest.raises(QuotaExceeded) as refused:
        coordinator.saga_begin(actor=operator)

    assert "SAGA_MAX_NEW_SAGAS_PER_MINUTE" in refused.value.message and "Nothing was created" in refused.value.message
    assert 1 <= refused.value.extra["retry_after_seconds"] <= 60
    assert (Saga.objects.count(), AuditEvent.objects.count()) == (sagas, events)
    other = make_principal("bob", operator.tenant_id, "operator")  # the quota is the principal's, not the tenant's
    assert coordinator.saga_begin(actor=other).creator_principal_id == "bob"


def test_no_saga_rate_quota_by_default(operator: Principal):
    for _ in range(5):
        coordinator.saga_begin(actor=operator)
    assert Saga.objects.count() == 5


@override_settings(SAGA_MAX_CONCURRENT_RUNS_PER_TENANT=1)
def test_a_run_is_refused_while_the_tenants_quota_of_running_sagas_is_taken(
    operator: Principal, downstream: RecordingHTTPServer
):
    register(http_contract("ship", downstream.url))
    busy, waiting = coordinator.saga_begin(actor=operator), coordinator.saga_begin(actor=operator)
    for saga in (busy, waiting):
        coordinator.node_plan(actor=operator, saga_id=saga.id, action="ship", input={})
    Node.objects.filter(saga=busy).update(status=NodeStatus.EXECUTING)  # busy has a node in flight

    with pytest.raises(QuotaExceeded) as refused:
        coordinator.saga_run_ready(actor=operator, saga_id=waiting.id, wait_seconds=0)

    assert "SAGA_MAX_CONCURRENT_RUNS_PER_TENANT" in refused.value.message
    assert Saga.objects.get(pk=waiting.id).run_steps_left == 0 and downstream.requests == []
    assert status_for(refused.value) == 429
    Node.objects.filter(saga=busy).update(status=NodeStatus.COMPLETED)  # once it settles, the run may start
    assert coordinator.saga_run_ready(actor=operator, saga_id=waiting.id).count("COMPLETED") == 1


@pytest.mark.parametrize("variable", ["SAGA_MAX_NEW_SAGAS_PER_MINUTE", "SAGA_MAX_CONCURRENT_RUNS_PER_TENANT"])
def test_a_negative_quota_stops_start_up(variable: str):
    refused_at_start_up(variable, "-1")
