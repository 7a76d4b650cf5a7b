"""Governance inside the coordinator's transactions: build the sanitized facts, evaluate, audit the decision.

A decision is recorded in the same transaction as the state change it allowed. One that refuses the call is
raised as a `Refusal` (sagas.coordinator._tx): its transaction commits the decision, then the refusal reaches the
caller, so the evidence of a refusal is never rolled back with it.
"""

from __future__ import annotations

from typing import Any

from audit import telemetry
from audit.models import EventType as E
from governance import kill_switch
from governance.policy import engine as governance_policy
from governance.policy.facts import Decision, PolicyInput
from registry.errors import RegistryError
from registry.selectors import action_get
from registry.semantics import reversibility_of, risk_of
from sagas.coordinator import _gates as gates
from sagas.coordinator._actions import Pinned
from sagas.coordinator._tx import Tx
from sagas.errors import SagaError
from sagas.models import Node, Step
from sagas.selectors.approvals import has_binding_approval

NO_ACTION: dict[str, Any] = {}
# POLICY_SAFETY_OVERRIDE's status, in semantic-saga-mcp's words for the two fail-safe paths.
SAFETY_STATUS = {"reject": "SAFE_REJECTION", "rollback": "ROLLBACK_SAFETY_PATH"}


def active() -> bool:
    return governance_policy.engine() is not None


def _semantic(pinned: Pinned | None) -> dict[str, Any]:
    return dict(pinned.definition.get("semantic", {})) if pinned else NO_ACTION


def pinned_of(node: Node) -> Pinned | None:
    """The node's pinned contract for policy facts, even if its version was deactivated since."""
    try:
        row = action_get(node.action, node.action_version, include_inactive=True)
    except RegistryError:
        return None
    return Pinned(row.action_id, row.version, row.definition_hash, row.definition)


def _risk_units(tx: Tx) -> int:
    """Risk units the saga holds: every planned node and every immediate step, by its contract's risk."""
    risks: list[str] = [
        risk_of((snapshot.get("semantic") or {}).get("risk"))
        for snapshot in Step.objects.filter(saga=tx.saga, node__isnull=True).values_list("action_definition", flat=True)
    ]
    for node in Node.objects.filter(saga=tx.saga).only("action", "action_version"):
        pinned = pinned_of(node)
        risks.append(risk_of(_semantic(pinned).get("risk")))
    return sum(governance_policy.risk_units(risk) for risk in risks)


def facts(tx: Tx, phase: str, pinned: Pinned | None, requested_parallel: int = 0) -> PolicyInput:
    semantic = _semantic(pinned)
    return PolicyInput(
        tenant_id=tx.saga.tenant_id,
        principal_id=tx.actor.principal_id,
        principal_type=tx.actor.principal_type,
        roles=tx.actor.roles,
        scopes=tx.actor.scopes,
        phase=phase,
        action=pinned.action if pinned else "",
        action_version=pinned.version if pinned else "",
        action_kind=str(pinned.definition.get("kind", "")) if pinned else "",
        domain=str(semantic.get("domain", "")),
        operation=str(semantic.get("operation", "")),
        resource=str(semantic.get("resource", "")),
        risk=risk_of(semantic.get("risk")),  # none declared is unknown, as semantic-saga-mcp reads it
        reversibility=reversibility_of(semantic.get("reversibility")),
        saga_steps=Step.objects.filter(saga=tx.saga).count(),
        saga_planned_nodes=Node.objects.filter(saga=tx.saga).count(),
        saga_risk_units=_risk_units(tx),
        requested_parallel=requested_parallel,
        definition_changed=bool(pinned.definition.get("proxy", {}).get("definition_changed")) if pinned else False,
    )


def decide(
    tx: Tx,
    phase: str,
    pinned: Pinned | None = None,
    *,
    node: Node | None = None,
    requested_parallel: int = 0,
    as_evaluated: bool = False,
    approval_granted: bool | None = None,
) -> Decision:
    """Evaluate tenant policy for this phase now and audit it (POLICY_DECISION; nothing with mode none).

    In a preview saga the decision is recorded but not applied (nothing executes): callers get "allow", unless
    they ask for the decision `as_evaluated` to report what it would have done. `approval_granted` (recorded, as
    semantic-saga-mcp records it) defaults by phase: a node's binding approval when a gated node runs or is retried.
    """
    if not active():
        return governance_policy.NO_POLICY  # mode none: nothing to evaluate and nothing to audit
    subject = facts(tx, phase, pinned, requested_parallel)
    with telemetry.span("saga.policy", phase=phase, action=subject.action) as current:
        decision = governance_policy.evaluate(subject)
        current.set_attribute("policy.effect", decision.effect)
    telemetry.count("saga.policy_decisions", "Governance decisions", phase=phase, effect=decision.effect)
    tx.record(
        E.POLICY_DECISION,
        node=node,
        action=(pinned.action, pinned.version) if pinned else None,
        status=decision.effect.upper(),  # semantic-saga-mcp's casing: ALLOW, DENY, REQUIRE_APPROVAL
        data={
            "decision_id": decision.decision_id,
            "effect": decision.effect,
            "reason": decision.reason,
            "revision": decision.revision,
            "backend": decision.backend,
            "matched_rules": list(decision.matched_rules),
            "budget": decision.budget,
            "phase": phase,
            "action": subject.action,
            "risk": subject.risk,
            "counters": {
                "steps": subject.saga_steps,
                "planned_nodes": subject.saga_planned_nodes,
                "risk_units": subject.saga_risk_units,
                "requested_parallel": requested_parallel,
            },
            **_prospective(subject, pinned),
            "approval_granted": _approval_granted(phase, node, approval_granted),
            # In a preview saga the decision is evidence of what policy would do; it is not applied.
            **({"preview": True} if tx.saga.preview else {}),
        },
    )
    if tx.saga.preview and not as_evaluated and decision.effect != "allow":
        return governance_policy.NO_POLICY
    return decision


def _prospective(subject: PolicyInput, pinned: Pinned | None) -> dict[str, int]:
    """The counters as they would be if the decided operation went ahead (what our budget rules compare, and
    semantic-saga-mcp's `prospective_*` fields)."""
    phase = subject.phase
    figures = {
        "prospective_steps": subject.saga_steps + (1 if phase == "execute" or (phase == "run" and pinned) else 0),
        "prospective_planned_nodes": subject.saga_planned_nodes + (1 if phase == "plan" else 0),
        "prospective_risk_units": subject.saga_risk_units
        + (governance_policy.risk_units(subject.risk) if phase in ("plan", "execute") else 0),
    }
    if phase == "run" and not pinned:
        figures["requested_max_parallel"] = subject.requested_parallel
    return figures


def _approval_granted(phase: str, node: Node | None, given: bool | None) -> bool:
    if given is not None:
        return given
    if phase in ("run", "retry") and node is not None:
        return not node.approval_required or has_binding_approval(node)
    return phase not in ("execute", "plan")


def safety_override(tx: Tx, operation: str, node: Node | None = None) -> None:
    """Rollback and rejection never depend on business policy; the evidence says they bypassed it."""
    if active():
        tx.record(
            E.POLICY_SAFETY_OVERRIDE,
            node=node,
            status=SAFETY_STATUS.get(operation, operation.upper()),
            data={
                "operation": operation,
                "phase": operation,
                "reason": "rollback and rejection are always allowed after RBAC",
            },
        )


def refusal(decision: Decision, what: str) -> SagaError:
    return gates.policy_denied(decision, what)


def kill_switch_stop(tx: Tx, what: str, node: Node | None = None) -> SagaError | None:
    """The refusal (already audited) when a kill switch stops new forward work on this saga, else None."""
    if not getattr(tx.saga, "kill_switched", True):
        return None  # the lock query found no switch (sagas.coordinator._tx), so no second query is needed
    switch = kill_switch.engaged(tx.saga.tenant_id, tx.saga.id)
    if switch is None:
        return None
    scope = "this saga" if switch.saga_id else f"tenant {switch.tenant_id}"
    tx.record(
        E.KILL_SWITCH_REFUSED,
        node=node,
        status="refused",
        data={"scope": "saga" if switch.saga_id else "tenant", "what": what, "engaged_by": switch.engaged_by},
    )
    return gates.kill_switch(scope, switch.reason, switch.engaged_by, what)
