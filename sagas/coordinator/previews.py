"""Preview sagas: everything but the side effect (docs/architecture.md section 5; docs/preview_and_mcp_actions.md).

A saga begun with `preview=True` plans, executes and runs like any other, except that no action is ever called:
each step is journaled `DRY` with the request it would have sent (templates resolved, secrets redacted) and a
verdict: would it run, wait for approval, be denied by tenant policy, or be stopped by the kill switch. Policy is
evaluated and recorded (`POLICY_DECISION` with `preview: true`) but not applied, because nothing executes; the dry
run is what the policy *would* have done. Each dry step is a `STEP_DRY` event in the saga's audit chain, so a plan
is auditable history. A preview is never committed: it is promoted to a real saga that plans the same nodes again
with every check run afresh (nothing is trusted from the dry run), or rolled back to discard it.
"""

from __future__ import annotations

from typing import Any

from audit.models import EventType as E
from governance.identity.principal import Principal
from governance.identity.rbac import EXECUTE, authorize
from registry.dry_requests import preview_request
from registry.errors import ActionFailure
from sagas.coordinator import _actions
from sagas.coordinator import policy as _policy
from sagas.coordinator._tx import Tx, locked_saga
from sagas.coordinator.nodes import node_plan
from sagas.coordinator.sagas import saga_begin
from sagas.errors import InvalidTransition, SagaError
from sagas.models import Node, Saga, Step
from sagas.states import NodeStatus, SagaStatus, StepStatus

# Nodes a dry run evaluates: every node that has not run (DRY ones already were).
DRY_RUN_FROM = frozenset(
    {NodeStatus.WAITING_DEPENDENCY, NodeStatus.WAITING_APPROVAL, NodeStatus.READY, NodeStatus.BLOCKED}
)
DRY_NOTE = (
    "Recorded as a dry run and NOT executed: this is a preview saga, so nothing reaches the real world. Keep "
    "planning; get_preview_report shows what the whole saga would do, and promote_preview runs it for real."
)


def dry_run_nodes(tx: Tx) -> int:
    """Evaluate every not-yet-evaluated node of a preview saga in planning order (dependencies first). Returns how
    many were recorded DRY. Runs inside the run request's transaction: nothing here leaves the database."""
    nodes = list(Node.objects.filter(saga=tx.saga, status__in=DRY_RUN_FROM).order_by("position"))
    for node in nodes:
        step, verdict = _dry_step(tx, node.action, node.action_version, node.input, node=node)
        tx.transition(node, NodeStatus.DRY, step=step, result=verdict, error=None)
    return len(nodes)


def dry_execute(tx: Tx, pinned: _actions.Pinned, payload: dict[str, Any]) -> Step:
    """The immediate-step form (execute_saga_step in a preview saga): one DRY step, nothing called."""
    step, _ = _dry_step(tx, pinned.action, pinned.version, payload, pinned=pinned)
    return step


def _dry_step(
    tx: Tx,
    action: str,
    version: str,
    payload: dict[str, Any],
    *,
    node: Node | None = None,
    pinned: _actions.Pinned | None = None,
) -> tuple[Step, dict[str, Any]]:
    if pinned is None:
        assert node is not None
        pinned = _pinned_or_none(node)
    step = Step(
        saga=tx.saga,
        sequence=tx.saga.next_sequence,
        node=node,
        action=action,
        action_version=version,
        action_definition_hash=pinned.definition_hash if pinned else (node.action_definition_hash if node else ""),
        action_definition=pinned.definition if pinned else {},
        input=payload,
        status=StepStatus.DRY,
        attempts=0,
    )
    verdict = _verdict(tx, step, pinned, node)
    step.result = {"dry_run": True, "verdict": verdict["outside_preview"], "note": DRY_NOTE, **verdict}
    step.save(force_insert=True)
    tx.journal.note_new(step)
    tx.update(tx.saga, next_sequence=tx.saga.next_sequence + 1)
    tx.record(
        E.STEP_DRY,
        node=node,
        step=step,
        status=StepStatus.DRY,
        data={key: verdict[key] for key in ("outside_preview", "reversibility", "risk", "policy_effect")},
    )
    return step, verdict


def _pinned_or_none(node: Node) -> _actions.Pinned | None:
    try:
        return _actions.pinned_version(node.action, node.action_version, node.action_definition_hash)
    except SagaError:
        return None


def _verdict(tx: Tx, step: Step, pinned: _actions.Pinned | None, node: Node | None) -> dict[str, Any]:
    """What would have happened outside preview, and why (the facts the preview report groups and explains)."""
    semantic = dict(pinned.definition.get("semantic", {})) if pinned else {}
    verdict: dict[str, Any] = {
        "reversibility": str(semantic.get("reversibility", "unknown")),
        "risk": str(semantic.get("risk", "low")),
        "policy_effect": "allow",
        "matched_rules": [],
        "budget": None,
        "request": None,
        "outside_preview": "would run",
        "why": "",
    }
    if pinned is None:
        verdict.update(
            outside_preview="would fail before running",
            why="its pinned contract no longer matches the registry (DEFINITION_HASH_MISMATCH or retired)",
        )
        return verdict
    try:
        verdict["request"] = preview_request(pinned.definition, input=step.input, saga_id=tx.saga.id, step_id=step.id)
    except ActionFailure as failure:
        verdict.update(outside_preview="would fail before running", why=failure.message)
        return verdict
    decision = _policy.decide(tx, "run" if node else "execute", pinned, node=node, as_evaluated=True)
    verdict.update(policy_effect=decision.effect, matched_rules=list(decision.matched_rules), budget=decision.budget)
    if _policy.kill_switch_stop(tx, f"running {pinned.action} (preview)", node):
        verdict.update(outside_preview="would be stopped by the kill switch", why="a kill switch is engaged")
    elif decision.effect == "deny":
        source = f"budget {decision.budget}" if decision.budget else ", ".join(decision.matched_rules) or "default"
        verdict.update(outside_preview="would be denied by policy", why=f"{decision.reason} ({source})")
    elif decision.effect == "require_approval":
        rules = ", ".join(decision.matched_rules) or "default"
        verdict.update(outside_preview="would wait for approval", why=f"tenant policy requires approval ({rules})")
    elif node.approval_required if node is not None else bool(pinned.policy["approval_required"]):
        verdict.update(outside_preview="would wait for approval", why="its contract or its planner requires approval")
    return verdict


def saga_promote(*, actor: Principal, saga_id: object) -> Saga:
    """Start a real saga that plans the preview's steps again, in the same order and with the same dependencies.

    Needs a preview saga (any status but ROLLED_BACK). The new saga is ACTIVE with `metadata.promoted_from`; every
    node is planned through `node_plan`, so the registry, schema, policy, kill switch and approval checks all run
    again, and nothing is trusted from the dry run. Immediate dry steps become nodes that each depend on the one
    before. Audit SAGA_PROMOTED on the preview (data: the new saga's id). Errors: NOT_A_PREVIEW, and any refusal of
    the re-planning (the new saga then keeps the nodes planned so far, and says which one was refused).
    """
    authorize(actor, EXECUTE, "promote")
    plan = _promotion_plan(actor, saga_id)
    saga = saga_begin(actor=actor, metadata={**plan["metadata"], "promoted_from": str(plan["preview_id"])})
    with locked_saga(plan["preview_id"], actor) as tx:
        tx.record(E.SAGA_PROMOTED, status=tx.saga.status, data={"promoted_to": str(saga.id)})
    for item in plan["nodes"]:
        node_plan(actor=actor, saga_id=saga.id, **item)
    saga.refresh_from_db()
    return saga


def _promotion_plan(actor: Principal, saga_id: object) -> dict[str, Any]:
    """Read the preview under its lock: nodes (and immediate steps) in planning order, as node_plan arguments."""
    with locked_saga(saga_id, actor) as tx:
        if not tx.saga.preview:
            raise InvalidTransition(
                "NOT_A_PREVIEW",
                f"Saga {tx.saga.id} is not a preview saga, so there is nothing to promote. Begin a saga with "
                "preview=true to dry-run a plan first.",
            )
        if tx.saga.status == SagaStatus.ROLLED_BACK:
            raise InvalidTransition(
                "PREVIEW_DISCARDED",
                f"Preview saga {tx.saga.id} was rolled back (discarded). Begin a new preview or a real saga.",
            )
        metadata = {k: v for k, v in tx.saga.metadata.items() if not k.startswith("_")}
        return {"preview_id": tx.saga.id, "metadata": metadata, "nodes": _replan_items(tx.saga)}


def _replan_items(saga: Saga) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    keys: dict[Any, str] = {}
    for node in saga.nodes.prefetch_related("dependency_links").order_by("position"):
        keys[node.pk] = node.key or f"node-{node.position}"
        deps = [keys[link.depends_on_id] for link in node.dependency_links.all()]
        items.append(_item(node.action, node.action_version, node.input, keys[node.pk], deps, node.approval_required))
    previous: list[str] = []
    for step in saga.steps.filter(node__isnull=True).order_by("sequence"):
        key = f"step-{step.sequence}"
        items.append(_item(step.action, step.action_version, step.input, key, previous, None))
        previous = [key]
    return items


def _item(action: str, version: str, payload: Any, key: str, deps: list[str], gate: bool | None) -> dict[str, Any]:
    # A caller's gate carries over; contract and policy gates are decided again by node_plan.
    return {
        "action": action,
        "version": version,
        "input": payload,
        "key": key,
        "depends_on": deps,
        "approval_required": True if gate else None,
    }
