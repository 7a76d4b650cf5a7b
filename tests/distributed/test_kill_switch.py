"""The kill switch stops new forward work at once, including nodes already queued on workers."""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command

from audit.models import AuditEvent
from governance.errors import Forbidden
from governance.identity.principal import Principal
from governance.kill_switch import kill_switch_engage, kill_switch_release
from sagas import coordinator
from sagas.errors import SagaError
from sagas.models import Node
from sagas.states import NodeStatus, SagaStatus
from tests.conftest import make_principal
from tests.contracts import http_contract, register
from tests.httpserver import RecordingHTTPServer
from tests.sagas.helpers import wait_until


@pytest.fixture
def tenant_admin() -> Principal:
    return make_principal("ada", "acme", "admin")


def test_kill_switch_stops_queued_work_and_keeps_rollback(
    executor_mode: str, operator: Principal, tenant_admin: Principal, downstream: RecordingHTTPServer
):
    # given a chain a -> b whose first call is in progress on an executor
    register(http_contract("slow", downstream.url))
    register(http_contract("next", downstream.url))
    downstream.script("/slow", [(200, {}, 1.5)])
    saga = coordinator.saga_begin(actor=operator)
    coordinator.node_plan(actor=operator, saga_id=saga.id, action="slow", input={}, key="a")
    coordinator.node_plan(actor=operator, saga_id=saga.id, action="next", input={}, key="b", depends_on=["a"])
    coordinator.saga_run_ready(actor=operator, saga_id=saga.id, wait_seconds=0)
    wait_until(lambda: len(downstream.requests_to("/slow")) == 1, what="the first call to start")
    # when an admin engages the tenant's kill switch while it runs
    kill_switch_engage(actor=tenant_admin, reason="incident 42")
    wait_until(lambda: Node.objects.get(saga=saga, key="a").status == NodeStatus.COMPLETED, what="a to finish")
    # then b, which became ready, is never started, and the refusal is audited
    wait_until(
        lambda: AuditEvent.objects.filter(saga_id=saga.id, event_type="KILL_SWITCH_REFUSED").exists(),
        what="the refused claim to be audited",
    )
    assert Node.objects.get(saga=saga, key="b").status == NodeStatus.READY
    assert downstream.requests_to("/next") == []
    # and new work is refused with the reason, while rollback still works
    with pytest.raises(SagaError) as refused:
        coordinator.saga_run_ready(actor=operator, saga_id=saga.id)
    assert refused.value.code == "KILL_SWITCH_ENGAGED" and "incident 42" in refused.value.message
    with pytest.raises(SagaError):
        coordinator.saga_begin(actor=operator)
    assert coordinator.saga_rollback(actor=operator, saga_id=saga.id).status == SagaStatus.ROLLED_BACK
    kill_switch_release(actor=tenant_admin)
    assert coordinator.saga_begin(actor=operator).status == SagaStatus.ACTIVE


def test_only_admins_engage_it_and_the_command_reports_it(operator: Principal):
    with pytest.raises(Forbidden) as refused:
        kill_switch_engage(actor=operator, reason="try")
    assert refused.value.code == "FORBIDDEN"
    out = io.StringIO()
    call_command("kill_switch", "engage", "--tenant", "acme", "--reason", "maintenance", stdout=out)
    call_command("kill_switch", "status", "--tenant", "acme", stdout=out)
    call_command("kill_switch", "release", "--tenant", "acme", stdout=out)
    text = out.getvalue()
    assert "engaged: kill switch acme (whole tenant)" in text and "maintenance" in text and "released" in text
