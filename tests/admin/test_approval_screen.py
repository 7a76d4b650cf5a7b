"""The approval queue: list, confirm, approve or reject (single and bulk), then run ready nodes, all in the admin."""

from __future__ import annotations

from html import unescape

from django.test import Client

from governance.identity.principal import Principal
from sagas import coordinator
from sagas.models import Approval, Node, Saga
from sagas.states import ApprovalStatus, NodeStatus, SagaStatus
from tests.admin.conftest import gated_saga, messages_of
from tests.approvals import CHARGE_INPUT, LONG_NOTE, context_block, digest_of, plan_charge, text_of
from tests.contracts import http_contract, register
from tests.held_calls import held_changed_tweet, held_create_contact, held_send_email
from tests.httpserver import RecordingHTTPServer
from tests.sagas.helpers import wait_until

QUEUE = "/admin/sagas/saga/approvals/"
DECIDE = "/admin/sagas/saga/approvals/decide/"


def test_queue_lists_waiting_nodes_oldest_first_with_risk_and_requester(
    olga: Client, operator: Principal, downstream: RecordingHTTPServer
):
    # given two gated nodes planned by alice
    _saga, (first, second) = gated_saga(operator, downstream, keys=("first", "second"))
    # when
    page = olga.get(QUEUE).content.decode()
    # then both rows are there, oldest first, with the contract's semantics and the planner
    assert page.index(f'id="approval-row-{first.id}"') < page.index(f'id="approval-row-{second.id}"')
    assert "low" in page and "compensable" in page and "alice" in page and "contract" in page
    assert f'id="approve-{first.id}"' in page and f'id="reject-{first.id}"' in page
    assert 'id="bulk-approve"' in page


def test_confirmation_page_renders_without_deciding(olga: Client, operator: Principal, downstream: RecordingHTTPServer):
    _saga, (node,) = gated_saga(operator, downstream)
    page = olga.get(DECIDE, {"decision": "approve", "node": str(node.id)})
    assert page.status_code == 200
    html = page.content.decode()
    assert 'id="confirm-approve"' in html and 'name="reason"' in html and 'id="id_run_ready"' in html
    node.refresh_from_db()
    assert node.status == NodeStatus.WAITING_APPROVAL


def test_approve_then_run_executes_the_node_and_the_saga_can_commit(
    olga: Client, operator: Principal, downstream: RecordingHTTPServer
):
    # given a gated node
    saga, (node,) = gated_saga(operator, downstream)
    # when olga approves it with "run ready nodes" ticked
    answer = olga.post(DECIDE, {"decision": "approve", "node": str(node.id), "reason": "ok", "run_ready": "on"})
    # then she is sent back to the queue, the approval records her, and the node runs on the executor
    assert answer.status_code == 302 and answer["Location"] == QUEUE
    assert any("Approved 1 node" in m for m in messages_of(answer))
    approval = Approval.objects.get(node=node)
    assert approval.status == ApprovalStatus.APPROVED and approval.decided_by == "user:olga"
    assert approval.reason == "ok"
    wait_until(lambda: Node.objects.get(pk=node.pk).status == NodeStatus.COMPLETED, what="approved node completes")
    # and the saga commits from its detail page
    detail = olga.get(f"/admin/sagas/saga/{saga.id}/detail/").content.decode()
    assert 'id="saga-commit"' in detail
    olga.post(f"/admin/sagas/saga/{saga.id}/do/commit/")
    assert Saga.objects.get(pk=saga.id).status == SagaStatus.COMMITTED


def test_bulk_approve_decides_every_selected_node(olga: Client, operator: Principal, downstream: RecordingHTTPServer):
    _saga, nodes = gated_saga(operator, downstream, keys=("a", "b", "c"))
    answer = olga.post(DECIDE, {"decision": "approve", "node": [str(n.id) for n in nodes[:2]]})
    assert any("Approved 2 node(s): a, b" in m for m in messages_of(answer))
    statuses = dict(Node.objects.values_list("key", "status"))
    assert statuses == {"a": NodeStatus.READY, "b": NodeStatus.READY, "c": NodeStatus.WAITING_APPROVAL}


def test_bulk_reject_blocks_and_asks_for_recovery(olga: Client, operator: Principal, downstream: RecordingHTTPServer):
    saga, nodes = gated_saga(operator, downstream, keys=("a", "b"))
    confirm = olga.get(DECIDE, {"decision": "reject", "node": [str(n.id) for n in nodes]}).content.decode()
    assert 'id="confirm-reject"' in confirm and "id_run_ready" not in confirm
    olga.post(DECIDE, {"decision": "reject", "node": [str(n.id) for n in nodes], "reason": "not today"})
    assert set(Node.objects.values_list("status", flat=True)) == {NodeStatus.REJECTED}
    assert Saga.objects.get(pk=saga.id).status == SagaStatus.RECOVERY_REQUIRED
    assert set(Approval.objects.values_list("reason", flat=True)) == {"not today"}


def test_coordinator_refusal_is_shown_and_other_nodes_still_decided(
    olga: Client, operator: Principal, downstream: RecordingHTTPServer
):
    # given two waiting nodes, one of which someone else decides first
    saga, (first, second) = gated_saga(operator, downstream, keys=("first", "second"))
    from sagas import coordinator

    coordinator.node_approve(actor=operator, saga_id=saga.id, node_id=first.id)
    # when olga approves both
    answer = olga.post(DECIDE, {"decision": "approve", "node": [str(first.id), str(second.id)]})
    # then the coordinator's refusal for the first is shown, and the second is approved
    shown = messages_of(answer)
    assert any("first" in m and "not waiting for approval" in m for m in shown)
    assert any("Approved 1 node(s): second" in m for m in shown)


def test_expired_approval_is_refused_with_the_coordinators_message(
    olga: Client, operator: Principal, downstream: RecordingHTTPServer, settings: object
):
    settings.SAGA_APPROVAL_TTL_SECONDS = 60  # type: ignore[attr-defined]
    _saga, (node,) = gated_saga(operator, downstream)
    Approval.objects.filter(node=node).update(expires_at="2000-01-01T00:00:00Z")  # the request is long past due
    page = olga.get(QUEUE).content.decode()
    assert "expired" in page
    answer = olga.post(DECIDE, {"decision": "approve", "node": str(node.id)})
    assert any("expired" in m and "Retry the node" in m for m in messages_of(answer))
    assert Node.objects.get(pk=node.pk).status == NodeStatus.REJECTED


def test_policy_gate_requester_is_shown(olga: Client, operator: Principal, downstream: RecordingHTTPServer):
    # a caller-requested gate on an ungated contract names the caller as the requester
    register(http_contract("notify", downstream.url))
    from sagas import coordinator

    saga = coordinator.saga_begin(actor=operator)
    coordinator.node_plan(actor=operator, saga_id=saga.id, action="notify", input={}, approval_required=True)
    assert "caller" in olga.get(QUEUE).content.decode()


def test_unknown_decision_or_node_answers_404(olga: Client, operator: Principal, downstream: RecordingHTTPServer):
    _saga, (node,) = gated_saga(operator, downstream)
    assert olga.get(DECIDE, {"decision": "maybe", "node": str(node.id)}).status_code == 404
    assert olga.get(DECIDE, {"decision": "approve", "node": "not-a-uuid"}).status_code == 404
    assert olga.get(DECIDE, {"decision": "approve"}).status_code == 404


# --- what the approver sees ----------------------------------------------------------------------------------------


def test_queue_shows_the_input_its_digest_and_why_approval_is_needed(
    olga: Client, operator: Principal, downstream: RecordingHTTPServer
):
    # given a card charge waiting for approval
    _saga, node = plan_charge(operator, downstream)
    approval = Approval.objects.get(node=node)
    # when olga opens the queue
    block = context_block(olga.get(QUEUE).content.decode(), approval.id)
    # then the row shows the amount, the currency and the card, and the digest the approval binds to
    seen = text_of(block)
    assert "amount 4200" in seen and "currency EUR" in seen and "card tok_visa_4242" in seen
    assert approval.input_digest == digest_of(CHARGE_INPUT) and digest_of(CHARGE_INPUT) in seen
    row = text_of(olga.get(QUEUE).content.decode())
    assert f"compensable — corrected afterwards by POST {downstream.url}/refunds" in row
    assert "the contract charge@1.0.0 requires approval (execution_policy.approval_required)" in row


def test_decide_page_shows_what_is_approved_before_anything_is_decided(
    olga: Client, operator: Principal, downstream: RecordingHTTPServer
):
    # given a waiting charge
    _saga, node = plan_charge(operator, downstream)
    approval = Approval.objects.get(node=node)
    # when olga opens the confirmation page
    html = olga.get(DECIDE, {"decision": "approve", "node": str(node.id)}).content.decode()
    # then it shows the input, the contract's risk, reversibility and compensation, the reason and the digest
    seen = text_of(context_block(html, approval.id))
    assert "amount 4200" in seen and "currency EUR" in seen
    assert "Risk low" in seen and f"compensable — corrected afterwards by POST {downstream.url}/refunds" in seen
    assert "Approval required: the contract charge@1.0.0 requires approval" in seen
    assert f"Binds to input digest {digest_of(CHARGE_INPUT)}" in seen
    assert Node.objects.get(pk=node.pk).status == NodeStatus.WAITING_APPROVAL


def test_long_input_values_are_folded_with_the_whole_value_one_click_away(
    olga: Client, operator: Principal, downstream: RecordingHTTPServer
):
    # given a charge with a long note and a nested value
    _saga, node = plan_charge(operator, downstream, note=LONG_NOTE, tags=["a", "b"])
    approval = Approval.objects.get(node=node)
    # when the confirmation page is rendered
    block = context_block(olga.get(DECIDE, {"decision": "approve", "node": str(node.id)}).content.decode(), approval.id)
    # then the note is folded: a one-line preview in the summary, the whole text inside the details
    folded = block[block.index("<dt>note</dt>") :]
    folded = folded[: folded.index("</dd>")]
    assert "<details>" in folded and "…</summary>" in folded and "END-OF-NOTE</pre>" in folded
    summary = folded[folded.index("<summary") : folded.index("</summary>")]
    assert "END-OF-NOTE" not in summary
    # and short values stay unfolded
    amount = block[block.index("<dt>amount</dt>") :]
    assert "<details>" not in amount[: amount.index("</dd>")]
    assert '["a", "b"]' in text_of(block).replace("&quot;", '"')


def test_decide_page_says_when_a_named_node_no_longer_waits(
    olga: Client, operator: Principal, approver: Principal, downstream: RecordingHTTPServer
):
    saga, node = plan_charge(operator, downstream)
    coordinator.node_approve(actor=approver, saga_id=saga.id, node_id=node.id)
    html = olga.get(DECIDE, {"decision": "approve", "node": str(node.id)}).content.decode()
    assert "Not waiting for approval: deciding it will be refused." in html and "approval-context-" not in html


def test_saga_detail_shows_each_approvals_input_reason_and_digest(
    olga: Client, operator: Principal, approver: Principal, downstream: RecordingHTTPServer
):
    # given a charge that was approved
    saga, node = plan_charge(operator, downstream)
    coordinator.node_approve(actor=approver, saga_id=saga.id, node_id=node.id, reason="phoned the customer")
    approval = Approval.objects.get(node=node)
    # when the saga's detail page is opened
    html = olga.get(f"/admin/sagas/saga/{saga.id}/detail/").content.decode()
    # then its approvals section shows what was approved: input, contract facts, reason and digest
    seen = text_of(context_block(html, approval.id))
    assert "amount 4200" in seen and "currency EUR" in seen
    assert "the contract charge@1.0.0 requires approval" in seen and digest_of(CHARGE_INPUT) in seen
    assert "phoned the customer" in text_of(html[html.index('id="saga-approvals"') :])


# --- a call held by the MCP proxy -----------------------------------------------------------------------------------


def test_a_held_compensable_call_reads_in_the_proxys_terms_on_the_queue_and_the_decide_page(
    olga: Client, operator: Principal
):
    # given send_email (class C) held by the MCP proxy for a person
    approval = held_send_email(operator)
    node = approval.node
    # when olga opens the queue and the confirmation page
    queue = olga.get(QUEUE).content.decode()
    decide = olga.get(DECIDE, {"decision": "approve", "node": str(node.id)}).content.decode()
    # then the row names the tool and its server, not the generic action id and its version
    row = _read(queue[queue.index(f'id="approval-row-{node.id}"') :])
    assert "send_email on demo held by the MCP proxy" in row and "0.0.0+" not in _read(queue)
    for page in (queue, decide):
        seen = _read(context_block(page, approval.id))
        # the exact arguments, the class with how it was decided, the gate with why, and what undo could do
        assert "to ada@example.com" in seen and "subject Hello" in seen
        assert "Class C (by heuristic): the name starts with 'send': it cannot be unsent" in seen
        assert "Gate confirm (by tool): emails leave the building: a person confirms each" in seen
        assert "What undo could do: undo lists it for a person to correct: C" in seen
    # and the consequence is the class's real meaning: compensable, never "irreversible" nor "no undo"
    compensable = "compensable — cannot be undone, only corrected afterwards (an undo lists it for an operator)"
    assert compensable in _read(queue) and compensable in _read(context_block(decide, approval.id))
    assert "irreversible" not in _read(queue) and "no undo" not in _read(queue)
    assert "Tool send_email on server demo" in _read(context_block(decide, approval.id))


def test_a_held_reversible_call_names_its_inverse(olga: Client, operator: Principal):
    approval = held_create_contact(operator)
    seen = _read(context_block(olga.get(QUEUE).content.decode(), approval.id))
    assert "What undo could do: undo runs delete_contact(id=${result.id})" in seen
    assert "reversible — undone by delete_contact" in _read(olga.get(QUEUE).content.decode())


def test_a_held_call_shows_the_tools_pinned_definition_folded(olga: Client, operator: Principal):
    approval = held_send_email(operator)
    block = context_block(olga.get(QUEUE).content.decode(), approval.id)
    definition = block[block.index(f'id="held-definition-{approval.id}"') :]
    # folded under <details>: the pinned description, input schema and annotations, as the pin keeps them
    assert definition.startswith(f'id="held-definition-{approval.id}"') and "<summary>Pinned definition" in definition
    pinned = _read(definition[definition.index('class="mono definition-pinned"') :])
    assert '"description": "Send one email to one recipient."' in pinned
    assert '"destructiveHint": false' in pinned and '"subject": {' in pinned
    assert "definition-current" not in definition and "definition changed" not in block


def test_a_held_call_whose_definition_changed_shows_the_diff_and_both_definitions(olga: Client, operator: Principal):
    approval = held_changed_tweet(operator)
    html = olga.get(DECIDE, {"decision": "approve", "node": str(approval.node_id)}).content.decode()
    block = context_block(html, approval.id)
    seen = _read(block)
    # what differs, one line each
    assert "definition changed" in seen
    assert 'description: "Post a tweet." -> "Post a tweet, and DM every follower a copy."' in seen
    assert 'inputSchema.properties.dm_all: added ({"type": "boolean"})' in seen
    # and the pinned definition beside the one the server lists now (which approving runs)
    pinned = block[block.index("definition-pinned") : block.index("definition-current")]
    current = block[block.index("definition-current") :]
    assert "DM every follower" not in pinned and "Post a tweet." in pinned
    assert "DM every follower" in current and "dm_all" in current


def test_saga_detail_shows_a_held_call_in_the_proxys_terms(olga: Client, operator: Principal):
    approval = held_send_email(operator)
    html = olga.get(f"/admin/sagas/saga/{approval.node.saga_id}/detail/").content.decode()
    seen = _read(context_block(html, approval.id))
    assert "Tool send_email on server demo" in seen and "Class C (by heuristic)" in seen
    assert "compensable — cannot be undone, only corrected afterwards" in seen


def _read(html: str) -> str:
    """What a reader sees, entities decoded (quotes and apostrophes of the texts and the JSON definitions)."""
    return unescape(text_of(html))
