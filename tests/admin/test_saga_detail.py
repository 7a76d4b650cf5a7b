"""The saga detail page: state, actions valid in it, the DAG as inline SVG, journal, approvals, audit chain."""

from __future__ import annotations

from django.test import Client

from audit.models import AuditEvent
from governance.identity.principal import Principal
from sagas import coordinator
from sagas.console import dag
from sagas.models import Node, Saga
from sagas.states import NodeStatus, SagaStatus
from tests.admin.conftest import gated_saga, messages_of
from tests.contracts import http_contract, register
from tests.httpserver import RecordingHTTPServer
from tests.sagas.helpers import wait_until


def _diamond(actor: Principal, server: RecordingHTTPServer) -> tuple[Saga, dict[str, Node]]:
    register(http_contract("step", server.url))
    saga = coordinator.saga_begin(actor=actor)
    plan = coordinator.node_plan
    a = plan(actor=actor, saga_id=saga.id, action="step", input={}, key="a")
    b = plan(actor=actor, saga_id=saga.id, action="step", input={}, key="b", depends_on=[str(a.id)])
    c = plan(actor=actor, saga_id=saga.id, action="step", input={}, key="c", depends_on=[str(a.id)])
    d = plan(actor=actor, saga_id=saga.id, action="step", input={}, key="d", depends_on=[str(b.id), str(c.id)])
    return saga, {"a": a, "b": b, "c": c, "d": d}


def test_layout_puts_every_dependency_left_of_its_dependant():
    nodes = [
        dag.DagNode("a", "a", "x", "1", NodeStatus.COMPLETED),
        dag.DagNode("b", "b", "x", "1", NodeStatus.READY, ("a",)),
        dag.DagNode("c", "c", "x", "1", NodeStatus.READY, ("a",)),
        dag.DagNode("d", "d", "x", "1", NodeStatus.WAITING_DEPENDENCY, ("b", "c")),
        dag.DagNode("e", "e", "x", "1", NodeStatus.WAITING_DEPENDENCY, ("a", "d")),  # spans layers
    ]
    placed = dag.layout(nodes).placed
    assert [placed[k].layer for k in "abcde"] == [0, 1, 1, 2, 3]
    assert {placed["b"].row, placed["c"].row} == {0, 1}
    for node in nodes:
        assert all(placed[dep].x < placed[node.id].x for dep in node.depends_on)


def test_svg_escapes_labels_and_draws_one_arrow_per_edge():
    nodes = [
        dag.DagNode("n1", "<script>alert(1)</script>", "a&b", "1", NodeStatus.FAILED),
        dag.DagNode("n2", None, "plain", "2", "SOMETHING_NEW", ("n1",)),
    ]
    svg = str(dag.render_svg(nodes))
    assert "<script>" not in svg and "&lt;script&gt;" in svg and "a&amp;b" in svg
    assert svg.count('class="dag-edge"') == 1 and 'marker-end="url(#dag-arrow)"' in svg
    assert 'id="dag-node-n1"' in svg and 'data-status="FAILED"' in svg
    assert str(dag.render_svg([])) == ""


def test_detail_draws_the_dag_coloured_by_status_with_a_legend(
    olga: Client, operator: Principal, downstream: RecordingHTTPServer
):
    saga, nodes = _diamond(operator, downstream)
    page = olga.get(f"/admin/sagas/saga/{saga.id}/detail/")
    assert page.status_code == 200
    html = page.content.decode()
    assert '<svg xmlns="http://www.w3.org/2000/svg" class="saga-dag"' in html
    assert html.count('class="dag-edge"') == 4
    for node in nodes.values():
        assert f'id="dag-node-{node.id}"' in html
    assert 'data-status="READY"' in html and 'data-status="WAITING_DEPENDENCY"' in html
    assert 'class="dag-legend"' in html and "COMPENSATION_FAILED" in html
    # ACTIVE with READY nodes: run and roll back apply, commit does not yet
    assert 'id="saga-run"' in html and 'id="saga-rollback"' in html and 'id="saga-commit"' not in html


def test_run_from_detail_completes_the_nodes_then_commit_applies(
    olga: Client, operator: Principal, downstream: RecordingHTTPServer
):
    saga, nodes = _diamond(operator, downstream)
    answer = olga.post(f"/admin/sagas/saga/{saga.id}/do/run/")
    assert answer["Location"] == f"/admin/sagas/saga/{saga.id}/detail/"
    assert any("Run requested" in m for m in messages_of(answer))
    wait_until(
        lambda: set(Node.objects.filter(saga=saga).values_list("status", flat=True)) == {NodeStatus.COMPLETED},
        what="all four nodes complete",
    )
    html = olga.get(f"/admin/sagas/saga/{saga.id}/detail/").content.decode()
    assert 'id="saga-commit"' in html and 'id="saga-run"' not in html
    assert html.count('data-status="COMPLETED"') == 4
    # the journal shows each step's contract version and hash
    assert html.count('id="step-row-') == 4 and nodes["a"].action_definition_hash[:14] in html


def test_detail_shows_approvals_checkpoints_timeline_without_payloads(
    olga: Client, operator: Principal, downstream: RecordingHTTPServer
):
    saga, (node,) = gated_saga(operator, downstream)
    coordinator.saga_checkpoint(actor=operator, saga_id=saga.id, name="before-wire", data={"secret": "CP-DATA"})
    coordinator.node_approve(actor=operator, saga_id=saga.id, node_id=node.id, reason="fine by me")
    html = olga.get(f"/admin/sagas/saga/{saga.id}/detail/").content.decode()
    assert "before-wire" in html and "CP-DATA" not in html
    assert "APPROVED" in html and "fine by me" in html
    assert "APPROVAL_GRANTED" in html and "SAGA_STARTED" in html
    assert '{"n": "wire"}' not in html  # node input is not shown
    assert 'id="audit-integrity"' in html and "valid" in html


def test_verify_now_reports_a_valid_chain(olga: Client, operator: Principal):
    saga = coordinator.saga_begin(actor=operator)
    answer = olga.post(f"/admin/sagas/saga/{saga.id}/verify/")
    assert answer["Location"] == f"/admin/sagas/saga/{saga.id}/detail/"
    assert any("Audit chain verified: 1 event(s)" in m for m in messages_of(answer))


def test_verify_now_names_the_broken_sequence(olga: Client, operator: Principal):
    saga = coordinator.saga_begin(actor=operator)
    coordinator.saga_checkpoint(actor=operator, saga_id=saga.id, name="x")
    AuditEvent.objects.filter(saga_id=saga.id, sequence=2).update(actor_principal_id="eve")  # test-only tampering
    answer = olga.post(f"/admin/sagas/saga/{saga.id}/verify/")
    assert any("BROKEN at sequence 2" in m for m in messages_of(answer))
    assert "broken" in olga.get(f"/admin/sagas/saga/{saga.id}/detail/").content.decode()


def test_verify_by_get_only_redirects(olga: Client, operator: Principal):
    saga = coordinator.saga_begin(actor=operator)
    answer = olga.get(f"/admin/sagas/saga/{saga.id}/verify/")
    assert answer.status_code == 302 and messages_of(answer) == []


def test_saga_list_links_to_the_detail(olga: Client, operator: Principal):
    saga = coordinator.saga_begin(actor=operator)
    listing = olga.get("/admin/sagas/saga/").content.decode()
    assert f'id="detail-{saga.id}"' in listing and 'id="tool-approvals"' in listing
    record = olga.get(f"/admin/sagas/saga/{saga.id}/change/").content.decode()
    assert 'id="tool-detail"' in record


def test_rolled_back_saga_offers_no_action(olga: Client, operator: Principal):
    saga = coordinator.saga_begin(actor=operator)
    coordinator.saga_rollback(actor=operator, saga_id=saga.id)
    assert Saga.objects.get(pk=saga.id).status == SagaStatus.ROLLED_BACK
    html = olga.get(f"/admin/sagas/saga/{saga.id}/detail/").content.decode()
    for button in ("saga-run", "saga-commit", "saga-rollback", "saga-retry-compensation", "saga-resume-rollback"):
        assert f'id="{button}"' not in html
