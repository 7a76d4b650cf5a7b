"""An operator does approval and recovery work in a real browser, without a shell."""

from __future__ import annotations

import re
from typing import Any

from governance.identity.principal import Principal
from sagas import coordinator
from sagas.models import Node, Saga
from sagas.states import NodeStatus, SagaStatus
from tests.contracts import http_contract, register
from tests.httpserver import RecordingHTTPServer

# Waiting for the executor to finish is polled by the browser itself (reloading the page), bounded by this.
SETTLE_MS = 20_000


def _wait_for_saga_status(page: Any, saga_id: object, pattern: str) -> None:
    """Reload the saga's detail page until its status badge matches (the executor runs in the background)."""
    page.goto(f"/admin/sagas/saga/{saga_id}/detail/")
    page.wait_for_function(
        """([pattern]) => {
            const badge = document.querySelector('#saga-status');
            if (badge && new RegExp(pattern).test(badge.textContent.trim())) return true;
            if (!window.__reloading) { window.__reloading = true; setTimeout(() => location.reload(), 300); }
            return false;
        }""",
        arg=[pattern],
        timeout=SETTLE_MS,
        polling=200,
    )


def _wait_for_node_status(page: Any, saga_id: object, node: Node, status: str) -> None:
    deadline_checks = SETTLE_MS // 300
    for _ in range(deadline_checks):
        node.refresh_from_db()
        if node.status == status:
            return
        page.wait_for_timeout(300)
    raise AssertionError(f"node {node.key} is {node.status}, expected {status}")


def test_operator_approves_a_waiting_node_sees_it_run_and_commits_the_saga(
    page: Any, shoot: Any, operator: Principal, downstream: RecordingHTTPServer
) -> None:
    # given a saga whose payment waits for approval, followed by a receipt that depends on it
    register(http_contract("charge", downstream.url, approval_required=True))
    register(http_contract("receipt", downstream.url))
    saga = coordinator.saga_begin(actor=operator, metadata={"order": "A-1001"})
    gate = coordinator.node_plan(actor=operator, saga_id=saga.id, action="charge", input={"amount": 42}, key="charge")
    coordinator.node_plan(
        actor=operator, saga_id=saga.id, action="receipt", input={}, key="receipt", depends_on=["charge"]
    )
    coordinator.saga_run_ready(actor=operator, saga_id=saga.id, wait_seconds=0)
    assert downstream.requests == []

    # when the operator opens the dashboard and the approval queue, and approves the node
    page.goto("/admin/")
    shoot(page, "console-dashboard")
    page.goto("/admin/sagas/saga/approvals/")
    assert page.locator(f"#approve-{gate.id}").is_visible()
    shoot(page, "console-approval-queue")
    page.click(f"#approve-{gate.id}")
    page.fill("#id_reason", "Customer confirmed by phone")
    assert page.locator("#id_run_ready").is_checked()
    page.click("#confirm-approve")

    # then both nodes run on the executor and the saga's detail page shows them completed
    _wait_for_node_status(page, saga.id, Node.objects.get(saga=saga, key="receipt"), NodeStatus.COMPLETED)
    page.goto(f"/admin/sagas/saga/{saga.id}/detail/")
    assert [r.path for r in downstream.requests] == ["/charge", "/receipt"]
    # the workflow picture shows both nodes, coloured as COMPLETED
    boxes = page.locator("g.dag-node")
    assert boxes.count() == 2 and boxes.first.is_visible()
    assert {boxes.nth(i).get_attribute("data-status") for i in range(2)} == {"COMPLETED"}
    shoot(page, "console-saga-detail")

    # when the operator commits from the detail page
    page.click("#saga-commit")
    page.click("#confirm-commit")
    _wait_for_saga_status(page, saga.id, "^COMMITTED$")
    assert Saga.objects.get(pk=saga.id).status == SagaStatus.COMMITTED


def test_operator_rolls_back_a_saga_that_needs_recovery(
    page: Any, shoot: Any, operator: Principal, approver: Principal, downstream: RecordingHTTPServer
) -> None:
    # given a saga whose first step completed and whose second step's approval was rejected
    register(http_contract("reserve", downstream.url, compensation_path="/release"))
    register(http_contract("ship", downstream.url, approval_required=True))
    saga = coordinator.saga_begin(actor=operator, metadata={"order": "B-2002"})
    coordinator.node_plan(actor=operator, saga_id=saga.id, action="reserve", input={"sku": "X"}, key="reserve")
    ship = coordinator.node_plan(
        actor=operator, saga_id=saga.id, action="ship", input={}, key="ship", depends_on=["reserve"]
    )
    coordinator.saga_run_ready(actor=operator, saga_id=saga.id, wait_seconds=30)
    coordinator.node_approve(actor=approver, saga_id=saga.id, node_id=ship.id, approved=False, reason="address")
    assert Saga.objects.get(pk=saga.id).status == SagaStatus.RECOVERY_REQUIRED

    # when the operator finds it on the recovery screen and rolls it back
    page.goto("/admin/sagas/saga/recovery/")
    assert re.search("reject", page.locator("#content").inner_text(), re.IGNORECASE)
    shoot(page, "console-recovery")
    page.click(f"#rollback-{saga.id}")
    page.click("#confirm-rollback")

    # then the completed reservation is compensated and the saga ends ROLLED_BACK
    _wait_for_saga_status(page, saga.id, "^ROLLED_BACK$")
    assert [r.path for r in downstream.requests] == ["/reserve", "/release"]
