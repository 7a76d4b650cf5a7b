"""Workflow nodes: plan a version-pinned node into the saga's DAG, and return a stopped node to scheduling (retry).

Deciding a node's approval is in sagas.coordinator.approvals; running it in sagas.coordinator.execution.node_attempts.
"""

from __future__ import annotations

from typing import Any

from audit.models import EventType as E
from governance.identity.principal import Principal
from governance.identity.rbac import EXECUTE, authorize
from sagas.coordinator import _actions, _graph
from sagas.coordinator import policy as _policy
from sagas.coordinator._actions import is_proxied_action
from sagas.coordinator._event_facts import planned_facts
from sagas.coordinator._guards import find_node, require_status
from sagas.coordinator._tx import Refusal, Tx, locked_saga
from sagas.coordinator.approvals import request_approval
from sagas.errors import InvalidInput, InvalidTransition, SagaError
from sagas.models import Node, NodeDependency
from sagas.states import RECOVERABLE_SAGA_STATES, RETRYABLE_NODE_STATES, ApprovalStatus, NodeStatus, SagaStatus

MAX_DEPENDENCIES = 256


def _dependencies(tx: Tx, depends_on: object) -> list[Node]:
    if not isinstance(depends_on, list | tuple) or len(depends_on) > MAX_DEPENDENCIES:
        raise InvalidInput(message=f"depends_on must be a list of at most {MAX_DEPENDENCIES} node ids or keys.")
    found: dict[object, Node] = {}
    for ref in depends_on:
        node = find_node(tx, ref)
        found[node.pk] = node
    return list(found.values())


def _replay(existing: Node, pinned: _actions.Pinned, payload: dict[str, Any], deps: list[Node]) -> Node:
    same = (
        existing.action == pinned.action
        and existing.action_version == pinned.version
        and existing.input == payload
        and {d.pk for d in deps} == set(existing.dependency_links.values_list("depends_on_id", flat=True))
    )
    if not same:
        raise SagaError(
            "NODE_KEY_CONFLICT",
            f"A node with key {existing.key!r} already exists in this saga with a different action, input or "
            "dependencies. Nothing was planned. Use a new key, or get_saga to see the existing node.",
        )
    return existing


def node_plan(
    *,
    actor: Principal,
    saga_id: object,
    action: str,
    input: dict[str, Any],
    key: str | None = None,
    depends_on: list[str] | None = None,
    approval_required: bool | None = None,
    version: str | None = None,
) -> Node:
    """Persist a version-pinned DAG node. Needs ACTIVE.

    The node starts WAITING_DEPENDENCY (a dependency has not completed; a gated node waits for its approval after
    that), WAITING_APPROVAL (contract, policy or caller asks for approval), READY or BLOCKED (a dependency already
    cannot complete). Audit NODE_PLANNED (+ APPROVAL_REQUESTED; again when a gated node's dependencies complete).
    Replanning the same key with the same content returns the existing node. Errors: INVALID_INPUT (nothing
    written), ACTION_NOT_FOUND, NODE_NOT_FOUND (unknown dependency), NODE_KEY_CONFLICT.
    """
    authorize(actor, EXECUTE, "plan")
    if key is not None and (not isinstance(key, str) or not key or len(key) > 200):
        raise InvalidInput(message="key must be a non-empty string of at most 200 characters, or null.")
    if approval_required is not None and not isinstance(approval_required, bool):
        raise InvalidInput(message="approval_required must be true, false or null (null = the contract decides).")
    pinned = _actions.resolve(action, version)
    payload = _actions.check_input(pinned, input)
    with locked_saga(saga_id, actor) as tx:
        require_status(tx, frozenset({SagaStatus.ACTIVE}), "planning")
        deps = _dependencies(tx, depends_on or [])
        if key is not None and (existing := Node.objects.filter(saga=tx.saga, key=key).first()):
            return _replay(existing, pinned, payload, deps)
        if stop := _policy.kill_switch_stop(tx, f"planning {pinned.action}"):
            raise Refusal(stop)
        granted = bool(approval_required) or bool(pinned.policy["approval_required"])
        decision = _policy.decide(tx, "plan", pinned, approval_granted=granted)
        if not decision.allowed:
            raise Refusal(_policy.refusal(decision, f"planning {pinned.action}@{pinned.version}"))
        gate = f"policy:{','.join(decision.matched_rules)}" if decision.effect == "require_approval" else None
        node = _create_node(tx, pinned, payload, key, deps, approval_required, policy_gate=gate)
    return node


def _create_node(
    tx: Tx,
    pinned: _actions.Pinned,
    payload: dict[str, Any],
    key: str | None,
    deps: list[Node],
    approval_required: bool | None,
    *,
    policy_gate: str | None = None,
) -> Node:
    # The contract's (or the policy's) gate cannot be waived by the caller; a caller may add one.
    contract_gate = bool(pinned.policy["approval_required"]) or policy_gate is not None
    node = Node(
        saga=tx.saga,
        key=key,
        position=tx.saga.next_position,
        action=pinned.action,
        action_version=pinned.version,
        action_definition_hash=pinned.definition_hash,
        input=payload,
        approval_required=contract_gate or bool(approval_required),
        status=NodeStatus.WAITING_DEPENDENCY,
    )
    node.save(force_insert=True)
    tx.update(tx.saga, next_position=tx.saga.next_position + 1)
    NodeDependency.objects.bulk_create([NodeDependency(node=node, depends_on=d) for d in deps])
    node.status = _graph.waiting_status(node, approved=False)
    if node.status != NodeStatus.WAITING_DEPENDENCY:
        node.save(update_fields=["status"])
    planned = planned_facts(dependencies=len(deps), approval_required=node.approval_required, key=key)
    tx.record(E.NODE_PLANNED, node=node, status=node.status, data={**planned, "depends_on": [str(d.pk) for d in deps]})
    if node.approval_required:
        request_approval(tx, node, policy_gate or ("contract" if contract_gate else "caller"))
    return node


def node_retry(*, actor: Principal, saga_id: object, node_id: object, force: bool = False) -> Node:
    """Return a FAILED, REJECTED or BLOCKED node to scheduling. Needs ACTIVE or RECOVERY_REQUIRED.

    A node whose outcome is uncertain needs `force=True` (the operator confirmed the external outcome was
    reconciled). A rejected node asks for approval again. The node keeps its step id. A RECOVERY_REQUIRED saga
    returns to ACTIVE. Audit NODE_RETRIED. Nothing executes until run_ready_steps.
    """
    authorize(actor, EXECUTE, "retry")
    if not isinstance(force, bool):
        raise InvalidInput(message="force must be true or false.")
    with locked_saga(saga_id, actor) as tx:
        require_status(tx, RECOVERABLE_SAGA_STATES, "retry")
        node = find_node(tx, node_id)
        if is_proxied_action(tx.saga, node.action):
            raise InvalidTransition(
                "PROXIED_CALL_NOT_RETRYABLE",
                f"Node {node.key or node.id} is a call an agent made through the MCP proxy; only that agent can make "
                "it again (the proxy never re-sends a call). Nothing was changed. Roll the session back, or let the "
                "agent call the tool again.",
            )
        if node.status not in RETRYABLE_NODE_STATES:
            raise InvalidTransition(
                "NODE_NOT_RETRYABLE",
                f"Node {node.key or node.id} is {node.status}; only FAILED, REJECTED or BLOCKED nodes can be "
                "retried. Nothing was changed.",
            )
        if node.uncertain_outcome and not force:
            raise SagaError(
                "UNCERTAIN_OUTCOME",
                f"Node {node.key or node.id} may or may not have taken effect (its last attempt's outcome is "
                "unknown). Nothing was retried. Confirm the external outcome first, then retry with force=true, "
                "or roll the saga back.",
            )
        if not (decision := _policy.decide(tx, "retry", _policy.pinned_of(node), node=node)).allowed:
            raise Refusal(_policy.refusal(decision, f"retrying node {node.key or node.id}"))
        _reschedule(tx, node, force=force)
        if tx.saga.status == SagaStatus.RECOVERY_REQUIRED:
            tx.transition(tx.saga, SagaStatus.ACTIVE, event=E.SAGA_RESUMED, error=None)
    return node


def _reschedule(tx: Tx, node: Node, *, force: bool) -> None:
    rejected = node.status == NodeStatus.REJECTED
    approved = node.approvals.filter(status=ApprovalStatus.APPROVED).exists() and not rejected
    target = _graph.waiting_status(node, approved=approved)
    if target == NodeStatus.BLOCKED:
        raise InvalidTransition(
            "DEPENDENCY_NOT_RETRYABLE",
            f"Node {node.key or node.id} still depends on a node that failed, was rejected or was compensated. "
            "Nothing was changed. Retry that dependency first.",
        )
    # dispatched_at cleared: a retried node runs on the next run request, not on a sweep's re-sent nudge.
    tx.transition(
        node,
        target,
        event=E.NODE_RETRIED,
        event_data={"force": force},
        attempts=0,
        error=None,
        uncertain_outcome=False,
        next_attempt_at=None,
        dispatched_at=None,
    )
    if target == NodeStatus.WAITING_APPROVAL:
        request_approval(tx, node, "retry")
    _graph.unblock_dependants(tx, node)
