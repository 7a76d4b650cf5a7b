"""Who may do what in the console: viewers look but cannot act, and another tenant's sagas do not exist."""

from __future__ import annotations

from django.test import Client

from governance.identity.principal import Principal
from sagas import coordinator
from sagas.models import Approval, Node, Saga
from sagas.states import ApprovalStatus, NodeStatus, SagaStatus
from tests.admin.conftest import Login, failed_saga, gated_saga, messages_of
from tests.httpserver import RecordingHTTPServer


def test_viewer_sees_the_tenants_work_on_every_screen(
    vera: Client, operator: Principal, downstream: RecordingHTTPServer
):
    # given a node waiting for approval and a saga that needs recovery
    saga, (node,) = gated_saga(operator, downstream)
    failed, failed_node = failed_saga(operator, downstream)
    # when the viewer opens each screen, then each shows them
    dashboard = vera.get("/admin/").content.decode()
    assert 'id="count-approvals">1<' in dashboard and 'id="count-recovery">1<' in dashboard
    assert 'id="count-total">2<' in dashboard
    assert f'id="approval-row-{node.id}"' in vera.get("/admin/sagas/saga/approvals/").content.decode()
    recovery = vera.get("/admin/sagas/saga/recovery/").content.decode()
    assert f'id="recovery-{failed.id}"' in recovery and 'data-kind="failed_node"' in recovery
    detail = vera.get(f"/admin/sagas/saga/{failed.id}/detail/").content.decode()
    assert f'id="dag-node-{failed_node.id}"' in detail and 'data-status="FAILED"' in detail
    assert 'id="policy-backend">none<' in vera.get("/admin/sagas/saga/policy/").content.decode()
    assert 'id="engage-kill-switch"' not in vera.get("/admin/governance/killswitch/").content.decode()
    assert str(saga.id) in vera.get("/admin/sagas/saga/").content.decode()


def test_viewer_gets_no_action_buttons(vera: Client, operator: Principal, downstream: RecordingHTTPServer):
    saga, (node,) = gated_saga(operator, downstream)
    failed, failed_node = failed_saga(operator, downstream)
    queue = vera.get("/admin/sagas/saga/approvals/").content.decode()
    assert f'id="approval-row-{node.id}"' in queue and f'id="approve-{node.id}"' not in queue
    assert 'id="bulk-approve"' not in queue and 'id="read-only-note"' in queue
    recovery = vera.get("/admin/sagas/saga/recovery/").content.decode()
    assert f'id="recovery-{failed.id}"' in recovery
    assert f'id="retry-{failed_node.id}"' not in recovery and f'id="rollback-{failed.id}"' not in recovery
    detail = vera.get(f"/admin/sagas/saga/{saga.id}/detail/").content.decode()
    assert 'id="saga-rollback"' not in detail and f'id="approve-{node.id}"' not in detail
    assert 'id="verify-audit"' in detail  # verifying is a read


def test_viewer_forged_posts_are_refused_and_change_nothing(
    vera: Client, operator: Principal, downstream: RecordingHTTPServer
):
    # given a gated node and a failed saga
    saga, (node,) = gated_saga(operator, downstream)
    failed, failed_node = failed_saga(operator, downstream)
    # when the viewer posts the forms anyway
    answers = [
        vera.post("/admin/sagas/saga/approvals/decide/", {"decision": "approve", "node": str(node.id)}),
        vera.post("/admin/sagas/saga/approvals/decide/", {"decision": "reject", "node": str(node.id)}),
        vera.post(f"/admin/sagas/saga/{failed.id}/nodes/{failed_node.id}/retry/", {"reconciled": "on"}),
        vera.post(f"/admin/sagas/saga/{failed.id}/do/rollback/"),
        vera.post(f"/admin/sagas/saga/{saga.id}/do/run/"),
        vera.post(f"/admin/sagas/saga/{saga.id}/do/commit/"),
    ]
    # then each is refused with the coordinator's message, and nothing changed
    for answer in answers:
        assert answer.status_code == 302
        assert any("may not" in m and "capability" in m for m in messages_of(answer)), messages_of(answer)
    assert Node.objects.get(pk=node.pk).status == NodeStatus.WAITING_APPROVAL
    assert Approval.objects.get(node=node).status == ApprovalStatus.PENDING
    assert Node.objects.get(pk=failed_node.pk).status == NodeStatus.FAILED
    assert Saga.objects.get(pk=failed.id).status == SagaStatus.RECOVERY_REQUIRED
    assert Saga.objects.get(pk=saga.id).status == SagaStatus.ACTIVE


def test_other_tenants_work_is_never_listed(
    olga: Client, outsider: Principal, operator: Principal, downstream: RecordingHTTPServer
):
    # given globex sagas waiting for approval and needing recovery
    _saga, (node,) = gated_saga(outsider, downstream)
    failed, _failed_node = failed_saga(outsider, downstream)
    # when acme's operator looks
    queue = olga.get("/admin/sagas/saga/approvals/").content.decode()
    recovery = olga.get("/admin/sagas/saga/recovery/").content.decode()
    # then none of it is there
    assert str(node.id) not in queue and 'id="approval-queue-empty"' in queue
    assert str(failed.id) not in recovery and 'id="recovery-empty"' in recovery


def test_other_tenants_action_urls_answer_404_and_change_nothing(
    olga: Client, outsider: Principal, downstream: RecordingHTTPServer
):
    saga, (node,) = gated_saga(outsider, downstream)
    failed, failed_node = failed_saga(outsider, downstream)
    gets = [
        f"/admin/sagas/saga/{saga.id}/detail/",
        f"/admin/sagas/saga/approvals/decide/?decision=approve&node={node.id}",
        f"/admin/sagas/saga/{failed.id}/nodes/{failed_node.id}/retry/",
        f"/admin/sagas/saga/{failed.id}/do/rollback/",
    ]
    for url in gets:
        assert olga.get(url).status_code == 404, url
    posts = [
        ("/admin/sagas/saga/approvals/decide/", {"decision": "approve", "node": str(node.id)}),
        (f"/admin/sagas/saga/{failed.id}/nodes/{failed_node.id}/retry/", {}),
        (f"/admin/sagas/saga/{failed.id}/do/rollback/", {}),
        (f"/admin/sagas/saga/{saga.id}/verify/", {}),
    ]
    for url, data in posts:
        assert olga.post(url, data).status_code == 404, url
    assert Node.objects.get(pk=node.pk).status == NodeStatus.WAITING_APPROVAL
    assert Saga.objects.get(pk=failed.id).status == SagaStatus.RECOVERY_REQUIRED


def test_node_of_another_saga_is_not_found_under_this_one(
    olga: Client, operator: Principal, downstream: RecordingHTTPServer
):
    saga, _node = failed_saga(operator, downstream)
    other = coordinator.saga_begin(actor=operator)
    assert olga.get(f"/admin/sagas/saga/{other.id}/nodes/{_node.id}/retry/").status_code == 404
    assert Saga.objects.get(pk=saga.id).status == SagaStatus.RECOVERY_REQUIRED


def test_account_without_a_tenant_is_denied_the_console(login: Login):
    client = login("nobody", tenant=None)
    assert client.get("/admin/sagas/saga/approvals/").status_code == 403
    assert client.get("/admin/sagas/saga/recovery/").status_code == 403


def test_anonymous_is_sent_to_login():
    answer = Client().get("/admin/sagas/saga/approvals/")
    assert answer.status_code == 302 and "/admin/login/" in answer["Location"]
