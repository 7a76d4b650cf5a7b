"""The one guarded transition (sagas.coordinator._tx.Tx.transition) refuses every move it must, for sagas, nodes,
steps and approvals alike: a move the state table does not list (InvalidTransition), and a move from a state the
row is no longer in because another writer got there first (StaleState). A refusal writes nothing.

A `Refusal` raised inside a saga transaction is the opposite case: what the transaction recorded commits, and the
refusal's error reaches the caller only after commit.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.db import models, transaction

from audit.models import AuditEvent
from audit.models import EventType as E
from governance.identity.principal import Principal
from sagas import coordinator
from sagas.coordinator._tx import Refusal, locked_saga
from sagas.errors import InvalidTransition, SagaError, StaleState
from sagas.models import Approval, Node, Saga, Step
from sagas.states import ApprovalStatus, NodeStatus, SagaStatus, StepStatus
from tests.contracts import register

NOOP = {
    "id": "noop",
    "version": "1.0.0",
    "kind": "builtin",
    "semantic": {
        "domain": "test",
        "operation": "noop",
        "resource": "nothing",
        "risk": "low",
        "reversibility": "reversible",
    },
    "input_schema": {"type": "object"},
    "output_schema": {"type": "object"},
    "execution_policy": {"idempotent": True},
    "forward": {"builtin": "noop"},
    "compensation": {"builtin": "noop"},
}


@pytest.fixture(autouse=True)
def _noop_contract() -> None:
    register(NOOP)


def _refused_transition(actor: Principal, saga: Saga, obj: models.Model, to: str) -> SagaError:
    """Attempt `obj` -> `to` in a saga transaction; return the refusal, which must roll the transaction back."""
    events_before = AuditEvent.objects.filter(saga_id=saga.id).count()
    with pytest.raises(SagaError) as refused, locked_saga(saga.id, actor) as tx:
        tx.record(E.CHECKPOINT_CREATED, data={"name": "written before the refused transition"})
        tx.transition(obj, to, event=E.NODE_READY)  # type: ignore[arg-type]
    assert AuditEvent.objects.filter(saga_id=saga.id).count() == events_before  # nothing of it committed
    return refused.value


def _stored_status(obj: models.Model) -> str:
    return str(type(obj).objects.values_list("status", flat=True).get(pk=obj.pk))


def _approval_of(node: Node) -> Approval:
    approval = Approval.objects.filter(node=node).select_related("node").first()
    assert approval is not None
    return approval


def _completed_step(actor: Principal) -> tuple[Saga, Step]:
    saga = coordinator.saga_begin(actor=actor)
    step = coordinator.saga_step_execute(actor=actor, saga_id=saga.id, action="noop", input={})
    assert step.status == StepStatus.COMPLETED
    return saga, step


def _waiting_node(actor: Principal) -> tuple[Saga, Node]:
    saga = coordinator.saga_begin(actor=actor)
    node = coordinator.node_plan(actor=actor, saga_id=saga.id, action="noop", input={}, approval_required=True)
    assert node.status == NodeStatus.WAITING_APPROVAL
    return saga, node


# --- InvalidTransition: the table does not list the move ----------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "to"),
    [
        ("saga", SagaStatus.ROLLED_BACK),  # ACTIVE -> ROLLED_BACK skips the rollback itself
        ("node", NodeStatus.COMPLETED),  # WAITING_APPROVAL -> COMPLETED skips approval and execution
        ("step", StepStatus.EXECUTING),  # COMPLETED -> EXECUTING would run a completed side effect again
        ("approval", ApprovalStatus.PENDING),  # PENDING -> PENDING is no decision at all
    ],
)
def test_a_move_the_table_does_not_list_is_refused_and_changes_nothing(operator: Principal, kind: str, to: str):
    # given a saga with a completed step and a node waiting for its pending approval
    saga, step = _completed_step(operator)
    node = coordinator.node_plan(actor=operator, saga_id=saga.id, action="noop", input={}, approval_required=True)
    obj: models.Model = {"saga": saga, "node": node, "step": step, "approval": _approval_of(node)}[kind]
    before = _stored_status(obj)
    # when
    refusal = _refused_transition(operator, saga, obj, to)
    # then
    assert isinstance(refusal, InvalidTransition)
    assert f"A {kind} cannot move from {before} to {to}. Nothing was changed." in refusal.message
    assert "get_saga" in refusal.message  # says what to do next
    assert _stored_status(obj) == before


@pytest.mark.parametrize(
    ("kind", "to"),
    [
        ("saga", SagaStatus.ACTIVE),  # COMMITTED
        ("node", NodeStatus.READY),  # COMPENSATED
        ("step", StepStatus.COMPENSATING),  # COMPENSATED
        ("approval", ApprovalStatus.REJECTED),  # APPROVED
    ],
)
def test_a_terminal_state_is_never_left(operator: Principal, kind: str, to: str):
    # given rows that reached a terminal state through the coordinator
    if kind == "saga":
        saga = coordinator.saga_begin(actor=operator)
        obj: models.Model = coordinator.saga_commit(actor=operator, saga_id=saga.id)
    elif kind == "approval":
        saga, node = _waiting_node(operator)
        coordinator.node_approve(actor=operator, saga_id=saga.id, node_id=node.id)
        obj = _approval_of(node)
    else:
        saga = coordinator.saga_begin(actor=operator)
        planned = coordinator.node_plan(actor=operator, saga_id=saga.id, action="noop", input={})
        coordinator.saga_run_ready(actor=operator, saga_id=saga.id)
        coordinator.saga_rollback(actor=operator, saga_id=saga.id)
        obj = Node.objects.get(pk=planned.pk) if kind == "node" else Step.objects.get(node=planned)
    terminal = _stored_status(obj)
    # when
    refusal = _refused_transition(operator, saga, obj, to)
    # then
    assert isinstance(refusal, InvalidTransition)
    assert _stored_status(obj) == terminal


# --- StaleState: the row left the state the caller read -------------------------------------------------------------


def _stale_copy(obj: models.Model) -> Any:
    return type(obj).objects.select_related(*(["node"] if isinstance(obj, Approval) else [])).get(pk=obj.pk)


def test_a_saga_moved_by_another_writer_first_is_stale(operator: Principal):
    # given a caller's read of an ACTIVE saga
    saga = coordinator.saga_begin(actor=operator)
    read = _stale_copy(saga)
    # when another request commits it first, and the caller then moves its read
    coordinator.saga_commit(actor=operator, saga_id=saga.id)
    refusal = _refused_transition(operator, saga, read, SagaStatus.FAILED)
    # then
    assert isinstance(refusal, StaleState)
    assert f"The saga {saga.id} is no longer ACTIVE: another request changed it first." in refusal.message
    assert _stored_status(saga) == SagaStatus.COMMITTED


def test_a_node_moved_by_another_writer_first_is_stale(operator: Principal, approver: Principal):
    # given a caller's read of a node waiting for approval
    saga, node = _waiting_node(operator)
    read = _stale_copy(node)
    # when another operator approves it first, and the caller then rejects its read
    coordinator.node_approve(actor=approver, saga_id=saga.id, node_id=node.id)
    refusal = _refused_transition(operator, saga, read, NodeStatus.REJECTED)
    # then
    assert isinstance(refusal, StaleState)
    assert "is no longer WAITING_APPROVAL" in refusal.message and "Read the saga again" in refusal.message
    assert _stored_status(node) == NodeStatus.READY


def test_a_step_moved_by_another_writer_first_is_stale(operator: Principal):
    # given a caller's read of a completed step
    saga, step = _completed_step(operator)
    read = _stale_copy(step)
    # when a rollback compensates it first, and the caller then claims its read for compensation
    coordinator.saga_rollback(actor=operator, saga_id=saga.id)
    refusal = _refused_transition(operator, saga, read, StepStatus.COMPENSATING)
    # then
    assert isinstance(refusal, StaleState)
    assert "is no longer COMPLETED" in refusal.message
    assert _stored_status(step) == StepStatus.COMPENSATED


def test_an_approval_decided_by_another_writer_first_is_stale(operator: Principal, approver: Principal):
    # given a caller's read of a pending approval
    saga, node = _waiting_node(operator)
    read = _stale_copy(_approval_of(node))
    # when another operator approves it first, and the caller then expires its read
    coordinator.node_approve(actor=approver, saga_id=saga.id, node_id=node.id)
    refusal = _refused_transition(operator, saga, read, ApprovalStatus.EXPIRED)
    # then
    assert isinstance(refusal, StaleState)
    assert "is no longer PENDING" in refusal.message
    assert _stored_status(read) == ApprovalStatus.APPROVED


# --- the batched form ---------------------------------------------------------------------------------------------


def _fan_out(actor: Principal) -> tuple[Saga, list[Node]]:
    saga = coordinator.saga_begin(actor=actor)
    coordinator.node_plan(actor=actor, saga_id=saga.id, action="noop", input={}, key="root", approval_required=True)
    leaves = [
        coordinator.node_plan(
            actor=actor, saga_id=saga.id, action="noop", input={}, key=f"leaf{i}", depends_on=["root"]
        )
        for i in range(3)
    ]
    assert {leaf.status for leaf in leaves} == {NodeStatus.WAITING_DEPENDENCY}
    return saga, leaves


def _refused_batch(actor: Principal, saga: Saga, nodes: list[Node], to: str) -> SagaError:
    with pytest.raises(SagaError) as refused, locked_saga(saga.id, actor) as tx:
        tx.transition_many(nodes, to, event=E.NODE_READY)
    return refused.value


def test_a_batch_in_mixed_states_is_refused_whole(operator: Principal):
    # given three dependants, one of which a caller reads as READY
    saga, leaves = _fan_out(operator)
    leaves[0].status = NodeStatus.READY
    # when the batch is moved together
    refusal = _refused_batch(operator, saga, leaves, NodeStatus.READY)
    # then none moved
    assert isinstance(refusal, InvalidTransition) and "Nothing was changed" in refusal.message
    assert {_stored_status(leaf) for leaf in leaves} == {NodeStatus.WAITING_DEPENDENCY}


def test_a_batch_one_of_which_another_writer_moved_first_is_stale(operator: Principal):
    # given a caller's read of three waiting dependants
    saga, leaves = _fan_out(operator)
    reads = [_stale_copy(leaf) for leaf in leaves]
    # when a rollback blocks them first, and the caller then promotes its reads together
    coordinator.saga_rollback(actor=operator, saga_id=saga.id)
    refusal = _refused_batch(operator, saga, reads, NodeStatus.READY)
    # then
    assert isinstance(refusal, StaleState) and "Another request changed these nodes first" in refusal.message
    assert {_stored_status(leaf) for leaf in leaves} == {NodeStatus.BLOCKED}


# --- a refusal keeps its evidence ---------------------------------------------------------------------------------


def test_a_refusal_raised_in_the_transaction_commits_what_it_recorded_then_reaches_the_caller(operator: Principal):
    # given
    saga = coordinator.saga_begin(actor=operator)
    error = SagaError("POLICY_DENIED", "Refused for this test. Nothing ran.")
    # when
    with pytest.raises(SagaError) as raised, locked_saga(saga.id, operator) as tx:
        tx.record(E.CHECKPOINT_CREATED, data={"name": "evidence of the refusal"})
        raise Refusal(error)
    # then the caller gets the error itself, and the evidence recorded before it is in the chain
    assert raised.value is error
    assert AuditEvent.objects.filter(saga_id=saga.id, event_type=E.CHECKPOINT_CREATED).count() == 1


def test_a_transition_is_applied_to_the_callers_object(operator: Principal):
    saga, node = _waiting_node(operator)
    approval = _approval_of(node)
    with locked_saga(saga.id, operator) as tx:
        tx.transition(approval, ApprovalStatus.REJECTED, event=E.APPROVAL_REJECTED, decided_by="alice")
    assert (approval.status, approval.decided_by) == (ApprovalStatus.REJECTED, "alice")
    assert _stored_status(approval) == ApprovalStatus.REJECTED
    event = AuditEvent.objects.filter(saga_id=saga.id, event_type=E.APPROVAL_REJECTED).get()
    assert event.node_id == str(node.id)
    # the seed's decision fields beside the approval's id: whether a reason was given, never its words
    assert event.data == {"approval_id": str(approval.id), "decision": "rejected", "reason_present": False}


def test_public_coordinator_functions_refuse_to_nest_in_a_transaction(operator: Principal):
    # durable=True: a caller's outer transaction could otherwise hold our commit (and its audit event) hostage
    with pytest.raises(RuntimeError, match="durable"), transaction.atomic():
        coordinator.saga_begin(actor=operator)
