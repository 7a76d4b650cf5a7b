"""The console shows a preview saga's report and promotes it through the coordinator."""

from __future__ import annotations

from django.test import Client

from governance.identity.principal import Principal
from sagas import coordinator
from sagas.models import Saga
from sagas.states import NodeStatus
from tests.admin.conftest import gated_saga, messages_of
from tests.httpserver import RecordingHTTPServer
from tests.proxy.preview_session import GROUPS, dry_proxy_session


def _dry_preview(actor: Principal, server: RecordingHTTPServer) -> Saga:
    gated_saga(actor, server)  # registers the approval-gated contract `wire`
    preview = coordinator.saga_begin(actor=actor, preview=True)
    coordinator.node_plan(actor=actor, saga_id=preview.id, action="wire", input={"n": 1}, key="wire")
    coordinator.saga_run_ready(actor=actor, saga_id=preview.id, wait_seconds=0)
    return preview


def test_an_operator_reads_the_report_and_promotes_the_preview(
    olga: Client, operator: Principal, downstream: RecordingHTTPServer
) -> None:
    preview = _dry_preview(operator, downstream)
    detail = olga.get(f"/admin/sagas/saga/{preview.id}/detail/").content.decode()
    assert 'id="saga-preview-report"' in detail and 'id="saga-promote"' in detail and 'id="saga-commit"' not in detail
    page = olga.get(f"/admin/sagas/saga/{preview.id}/preview/").content.decode()
    assert "Nothing reached the world" in page and "would wait for approval" in page
    assert 'id="class-compensable"' in page
    # when promoted through the confirmation page
    confirm = olga.get(f"/admin/sagas/saga/{preview.id}/do/promote/").content.decode()
    assert 'id="confirm-promote"' in confirm and "nothing is trusted from the dry run" in confirm
    answer = olga.post(f"/admin/sagas/saga/{preview.id}/do/promote/", {"confirm": "promote"})
    # then a real saga plans the node again, gated afresh
    real = Saga.objects.get(metadata__promoted_from=str(preview.id))
    assert not real.preview and real.nodes.get().status == NodeStatus.WAITING_APPROVAL
    assert any("promoted" in m for m in messages_of(answer))
    assert downstream.requests == []


def test_a_viewer_sees_the_report_but_cannot_promote(
    vera: Client, operator: Principal, downstream: RecordingHTTPServer
) -> None:
    preview = _dry_preview(operator, downstream)
    assert 'id="preview-promote"' not in vera.get(f"/admin/sagas/saga/{preview.id}/preview/").content.decode()
    answer = vera.post(f"/admin/sagas/saga/{preview.id}/do/promote/", {"confirm": "promote"})
    assert not Saga.objects.filter(metadata__promoted_from=str(preview.id)).exists()
    assert messages_of(answer)


def test_another_tenants_preview_is_not_found(
    login: object, outsider: Principal, downstream: RecordingHTTPServer
) -> None:
    preview = _dry_preview(outsider, downstream)
    olga = login("olga2", "acme", "operator")  # type: ignore[operator]
    assert olga.get(f"/admin/sagas/saga/{preview.id}/preview/").status_code == 404
    olga.post(f"/admin/sagas/saga/{preview.id}/do/promote/", {"confirm": "promote"})
    assert not Saga.objects.filter(metadata__promoted_from=str(preview.id)).exists()


def test_a_real_saga_has_no_preview_report(olga: Client, operator: Principal, downstream: RecordingHTTPServer) -> None:
    saga, _ = gated_saga(operator, downstream)
    answer = olga.get(f"/admin/sagas/saga/{saga.id}/preview/")
    assert answer.status_code == 302 and any("not a preview" in m for m in messages_of(answer))


def test_a_proxy_session_run_dry_shows_its_calls_by_class_with_the_gates_they_would_have_met(olga: Client) -> None:
    session = dry_proxy_session()  # tests/proxy/preview_session.py: two reads, then R, unknown x2, C x2, I dry
    page = olga.get(f"/admin/sagas/saga/{session.id}/preview/").content.decode()
    assert "Nothing reached the world. 2 read(s) executed, 6 call(s) recorded dry" in page
    rows = [page.index(f'id="class-{name}"') for name, _, _ in GROUPS]
    assert rows == sorted(rows)  # I, unknown, C, R, read: most dangerous first
    unknown = page[rows[1] : rows[2]]
    assert "demo/delete_contact, demo/update_contact" in unknown
    assert 'aria-label="1 allow, 1 confirm, 0 block"' in unknown and "1 confirm</span>" in unknown
    assert 'aria-label="1 allow, 0 confirm, 1 block"' in page[rows[2] : rows[3]]  # C: send_email ran, tweet blocked
    assert "executed" in page[rows[4] :].split("</tr>")[0]  # the reads ran
    tweet = page.split('id="preview-item-7"')[1].split("</tr>")[0]
    assert "post_tweet" in tweet and "gate-block" in tweet and "would be blocked by the gate" in tweet
    undo = page.split('id="undo-3"')[1].split("</tr>")[0]
    assert "runs its declared inverse demo/delete_contact" in undo
    assert 'id="preview-promote"' not in page and 'id="preview-rerun"' in page
