"""The recovery screen: why each saga waits for an operator, and only the actions that apply, each confirmed."""

from __future__ import annotations

import pytest
from django.db.models import F
from django.test import Client

from audit.models import AuditEvent
from governance.identity.principal import Principal
from sagas import coordinator
from sagas.models import Node, Saga, Step
from sagas.states import NodeStatus, SagaStatus, StepStatus
from tests.admin.conftest import failed_saga, gated_saga, messages_of
from tests.contracts import http_contract, register
from tests.httpserver import RecordingHTTPServer
from tests.sagas.helpers import wait_until

RECOVERY = "/admin/sagas/saga/recovery/"


def _uncertain_saga(actor: Principal, server: RecordingHTTPServer) -> tuple[Saga, Node]:
    """A pause-mode call that timed out after it was sent: FAILED with an uncertain outcome."""
    contract = http_contract("transfer", server.url, max_attempts=1, failure_mode="pause")
    contract["forward"]["timeout_seconds"] = 0.3
    register(contract)
    server.script("/transfer", [(200, {}, 1.0)])
    saga = coordinator.saga_begin(actor=actor)
    node = coordinator.node_plan(actor=actor, saga_id=saga.id, action="transfer", input={}, key="transfer")
    coordinator.saga_run_ready(actor=actor, saga_id=saga.id)
    node.refresh_from_db()
    assert node.uncertain_outcome
    return saga, node


def _rollback_failed_saga(actor: Principal, server: RecordingHTTPServer) -> Saga:
    register(http_contract("charge", server.url, compensation_attempts=1))
    saga = coordinator.saga_begin(actor=actor)
    coordinator.saga_step_execute(actor=actor, saga_id=saga.id, action="charge", input={})
    server.script("/charge/undo", [(500, {"error": "refund service down"})])
    saga = coordinator.saga_rollback(actor=actor, saga_id=saga.id)
    assert saga.status == SagaStatus.ROLLBACK_FAILED
    return saga


def test_failed_node_is_listed_with_retry_and_rollback(
    olga: Client, operator: Principal, downstream: RecordingHTTPServer
):
    saga, node = failed_saga(operator, downstream)
    page = olga.get(RECOVERY).content.decode()
    assert f'id="recovery-{saga.id}"' in page and 'data-kind="failed_node"' in page
    assert f'id="retry-{node.id}"' in page and f'id="rollback-{saga.id}"' in page
    assert f'id="force-retry-{node.id}"' not in page and f'id="retry-compensation-{saga.id}"' not in page


def test_retry_from_recovery_runs_the_node_again(olga: Client, operator: Principal, downstream: RecordingHTTPServer):
    # given a failed node whose downstream has recovered
    saga, node = failed_saga(operator, downstream)
    url = f"/admin/sagas/saga/{saga.id}/nodes/{node.id}/retry/"
    # when olga confirms a retry with "run ready nodes"
    confirm = olga.get(url, {"next": RECOVERY}).content.decode()
    assert 'id="confirm-retry"' in confirm and "id_reconciled" not in confirm
    answer = olga.post(url, {"run_ready": "on", "next": RECOVERY})
    # then the saga is ACTIVE again and the node completes on the executor
    assert answer["Location"] == RECOVERY
    assert any("Run requested" in m for m in messages_of(answer))
    wait_until(lambda: Node.objects.get(pk=node.pk).status == NodeStatus.COMPLETED, what="retried node completes")
    assert Saga.objects.get(pk=saga.id).status == SagaStatus.ACTIVE


def test_uncertain_outcome_needs_the_reconciled_checkbox(
    olga: Client, operator: Principal, downstream: RecordingHTTPServer
):
    # given a node whose outcome is unknown
    saga, node = _uncertain_saga(operator, downstream)
    page = olga.get(RECOVERY).content.decode()
    assert 'data-kind="uncertain_outcome"' in page and f'id="force-retry-{node.id}"' in page
    url = f"/admin/sagas/saga/{saga.id}/nodes/{node.id}/retry/"
    assert 'id="id_reconciled"' in olga.get(url).content.decode()
    # when posted without the confirmation, the coordinator refuses and nothing changes
    refused = olga.post(url, {})
    assert any("force=true" in m for m in messages_of(refused))
    assert Node.objects.get(pk=node.pk).status == NodeStatus.FAILED
    # when posted with it, the node is rescheduled
    olga.post(url, {"reconciled": "on"})
    node.refresh_from_db()
    assert node.status == NodeStatus.READY and node.uncertain_outcome is False


def test_rejected_approval_offers_retry_that_requests_approval_again(
    olga: Client, operator: Principal, downstream: RecordingHTTPServer
):
    saga, (node,) = gated_saga(operator, downstream)
    coordinator.node_approve(actor=operator, saga_id=saga.id, node_id=node.id, approved=False)
    page = olga.get(RECOVERY).content.decode()
    assert 'data-kind="rejected_approval"' in page and f'id="retry-{node.id}"' in page
    olga.post(f"/admin/sagas/saga/{saga.id}/nodes/{node.id}/retry/", {})
    assert Node.objects.get(pk=node.pk).status == NodeStatus.WAITING_APPROVAL
    assert Saga.objects.get(pk=saga.id).status == SagaStatus.ACTIVE


def test_rollback_from_recovery_compensates(olga: Client, operator: Principal, downstream: RecordingHTTPServer):
    saga, _node = failed_saga(operator, downstream)
    url = f"/admin/sagas/saga/{saga.id}/do/rollback/"
    assert 'id="confirm-rollback"' in olga.get(url).content.decode()
    answer = olga.post(url, {"next": RECOVERY})
    assert answer["Location"] == RECOVERY
    assert Saga.objects.get(pk=saga.id).status == SagaStatus.ROLLED_BACK
    assert any("rolled back" in m for m in messages_of(answer))


def test_rollback_failed_offers_retry_compensation_only(
    olga: Client, operator: Principal, downstream: RecordingHTTPServer
):
    # given a saga whose compensation failed
    saga = _rollback_failed_saga(operator, downstream)
    page = olga.get(RECOVERY).content.decode()
    assert 'data-kind="failed_compensation"' in page and "answered 500" in page
    assert f'id="retry-compensation-{saga.id}"' in page and f'id="rollback-{saga.id}"' not in page
    # when the operator retries the compensation after the refund service recovered
    url = f"/admin/sagas/saga/{saga.id}/do/retry_compensation/"
    assert 'id="confirm-retry_compensation"' in olga.get(url).content.decode()
    olga.post(url)
    # then the step is compensated and the saga rolled back
    assert Saga.objects.get(pk=saga.id).status == SagaStatus.ROLLED_BACK
    assert Step.objects.get(saga=saga).status == StepStatus.COMPENSATED
    assert f'id="recovery-{saga.id}"' not in olga.get(RECOVERY).content.decode()


def test_expired_lease_is_listed_with_rollback(olga: Client, operator: Principal, downstream: RecordingHTTPServer):
    # given a node in flight whose worker lost its lease: expired and fenced off (token + 1), as a sweeper would
    register(http_contract("transfer", downstream.url, failure_mode="pause"))
    downstream.script("/transfer", [(200, {}, 1.0)])
    saga = coordinator.saga_begin(actor=operator)
    node = coordinator.node_plan(actor=operator, saga_id=saga.id, action="transfer", input={})
    coordinator.saga_run_ready(actor=operator, saga_id=saga.id, wait_seconds=0)
    wait_until(lambda: Node.objects.get(pk=node.pk).status == NodeStatus.EXECUTING, what="attempt in flight")
    # test-only: the fence bump stops the worker's heartbeat from renewing the lease again
    Node.objects.filter(pk=node.pk).update(lease_expires_at="2000-01-01T00:00:00Z", fence_token=F("fence_token") + 1)
    # when / then
    page = olga.get(RECOVERY).content.decode()
    assert f'id="recovery-{saga.id}"' in page and 'data-kind="expired_lease"' in page
    assert f'id="rollback-{saga.id}"' in page and f'id="retry-{node.id}"' not in page
    # the stale worker's outcome is refused when its call returns (evidence, never state)
    stale = AuditEvent.objects.filter(saga_id=saga.id, event_type="STALE_WRITE_REFUSED")
    wait_until(stale.exists, timeout=10, what="the stale worker's write is refused")
    assert Node.objects.get(pk=node.pk).status == NodeStatus.EXECUTING


@pytest.mark.parametrize("operation", ["rollback", "retry_compensation", "run", "commit", "resume_rollback"])
def test_operation_confirmation_pages_show_the_saga_and_change_nothing(
    olga: Client, operator: Principal, downstream: RecordingHTTPServer, operation: str
):
    saga, _node = failed_saga(operator, downstream)
    html = olga.get(f"/admin/sagas/saga/{saga.id}/do/{operation}/", {"next": RECOVERY}).content.decode()
    # the page names the saga and its state, offers the one button, and carries where to return to
    assert f'id="confirm-{operation}"' in html and 'id="cancel"' in html
    assert str(saga.id) in html and 'class="badge st-RECOVERY_REQUIRED"' in html
    assert f'name="next" value="{RECOVERY}"' in html
    assert Saga.objects.get(pk=saga.id).status == SagaStatus.RECOVERY_REQUIRED


def test_an_unknown_operation_is_not_found(olga: Client, operator: Principal, downstream: RecordingHTTPServer):
    saga, _node = failed_saga(operator, downstream)
    assert olga.get(f"/admin/sagas/saga/{saga.id}/do/explode/").status_code == 404


def test_operation_refused_by_the_coordinator_shows_its_message(
    olga: Client, operator: Principal, downstream: RecordingHTTPServer
):
    # a RECOVERY_REQUIRED saga cannot run: the coordinator says what to do instead
    saga, _node = failed_saga(operator, downstream)
    answer = olga.post(f"/admin/sagas/saga/{saga.id}/do/run/")
    assert any(
        "RECOVERY_REQUIRED" in m and "Retry the failed node or roll back first" in m for m in messages_of(answer)
    )
    assert Saga.objects.get(pk=saga.id).status == SagaStatus.RECOVERY_REQUIRED


def test_nothing_to_recover_says_so(olga: Client):
    assert 'id="recovery-empty"' in olga.get(RECOVERY).content.decode()
