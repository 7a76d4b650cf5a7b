"""The preview report: what a preview saga would have done to the world, grouped by reversibility (reads only).

Built from the saga's DRY steps (their verdicts and redacted requests), its nodes and contracts, and the audit
chain's verdict. Shared by the MCP tool `get_preview_report`, the A2A operation, the REST endpoint, the admin
screen and `semantic-saga preview_report`. A proxy session run dry is reported in the proxy's vocabulary instead
(`grouping: "sagaz_class"`; sagas.selectors.proxy_preview_reports); every other preview by reversibility
(`grouping: "reversibility"`).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from audit.models import AuditEvent, EventType
from governance.identity.principal import Principal
from governance.identity.rbac import READ, authorize
from governance.policy.engine import risk_units
from registry.contracts import has_compensation
from registry.semantics import reversibility_of
from sagas.errors import InvalidTransition
from sagas.models import Saga, Step
from sagas.selectors import proxy_preview_reports as proxied
from sagas.selectors.audit_trail import saga_verify_audit
from sagas.selectors.sagas import saga_get
from sagas.states import NodeStatus, StepStatus

# Report order, most dangerous first; unknown is never assumed safe.
CLASSES = ("irreversible", "unknown", "compensable", "reversible", "read_only")
CLASS_MEANING = {
    "irreversible": "no way back once executed",
    "unknown": "reversibility unknown: no contract says; treat it as irreversible",
    "compensable": "cannot be undone, only corrected afterwards by its compensation",
    "reversible": "a known inverse (its compensation) restores the prior state",
    "read_only": "reads only; changes nothing",
}


def preview_report(*, actor: Principal, saga_id: object) -> dict[str, Any]:
    """Errors: SAGA_NOT_FOUND (also for another tenant's saga), NOT_A_PREVIEW."""
    authorize(actor, READ, "preview_report")
    saga = saga_get(actor=actor, saga_id=saga_id)
    if not saga.preview:
        raise InvalidTransition(
            "NOT_A_PREVIEW",
            f"Saga {saga.id} is not a preview saga; its steps really ran. get_saga_timeline shows what happened.",
        )
    steps = list(saga.steps.filter(status=StepStatus.DRY).select_related("node").order_by("sequence"))
    items = [_item(step) for step in steps]
    if saga.is_proxy_session:
        return _proxy_report(actor, saga, proxied.proxy_items(steps, items))
    not_dry = saga.nodes.exclude(status=NodeStatus.DRY).order_by("position")
    pending = list(not_dry.values_list("key", "action", "status"))
    return {
        **_common(actor, saga, items),
        "grouping": "reversibility",
        "summary": _summary(items, pending),
        "reads_executed": 0,
        "classes": _by_class(items),
        "not_yet_evaluated": [{"key": k, "action": a, "status": s} for k, a, s in pending],
        "compensation_plan": _compensation_plan(saga, items),
    }


def _proxy_report(actor: Principal, saga: Saga, items: list[dict[str, Any]]) -> dict[str, Any]:
    """A proxy session run dry: its reads ran (a blind agent cannot plan), the rest grouped by Sagaz class."""
    reads, refused = proxied.read_items(saga), proxied.refused_items(saga)
    return {
        **_common(actor, saga, items),
        "grouping": "sagaz_class",
        "summary": proxied.proxy_summary(items, len(reads), len(refused), proxied.held_count(saga)),
        "reads_executed": len(reads),
        "recorded_dry": len(items),
        "classes": proxied.proxy_groups(items, reads),
        "reads": reads,
        "refused": refused,
        "not_yet_evaluated": [],
        "compensation_plan": proxied.proxy_compensation_plan(items),
    }


def _common(actor: Principal, saga: Saga, items: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "saga_id": str(saga.id),
        "preview": True,
        "status": saga.status,
        "items": items,
        "would_wait_for_approval": [_ref(i) for i in items if i["outside_preview"] == "would wait for approval"],
        "would_be_denied": [_ref(i) for i in items if i["outside_preview"] == "would be denied by policy"],
        "would_be_stopped": [_ref(i) for i in items if "kill switch" in i["outside_preview"]],
        "would_fail": [_ref(i) for i in items if i["outside_preview"] == "would fail before running"],
        "would_be_blocked": [_ref(i) for i in items if i["outside_preview"] == "would be blocked by the gate"],
        "budget_impact": _budget(items),
        "audit": saga_verify_audit(actor=actor, saga_id=saga.id),
        "promoted_to": _promotions(saga),
    }


def _item(step: Step) -> dict[str, Any]:
    verdict = step.result if isinstance(step.result, dict) else {}
    return {
        "sequence": step.sequence,
        "step_id": str(step.id),
        "node_id": str(step.node_id) if step.node_id else None,
        "key": step.node.key if step.node else None,
        "action": step.action,
        "action_version": step.action_version,
        "class": _class_of(verdict.get("reversibility")),
        "risk": verdict.get("risk", "low"),
        "outside_preview": verdict.get("outside_preview", "would run"),
        "why": verdict.get("why", ""),
        "policy_effect": verdict.get("policy_effect", "allow"),
        "matched_rules": verdict.get("matched_rules", []),
        "budget": verdict.get("budget"),
        "request": verdict.get("request"),
        "has_compensation": has_compensation(step.action_definition) if step.action_definition else False,
        # Proxied calls: the Sagaz class and the gate the call would have met (sagas.coordinator.proxy.calls).
        "proxy": verdict.get("proxy"),
    }


def _class_of(reversibility: object) -> str:
    # Ours, or semantic-saga-mcp's word read as ours ("full" is reversible); anything else is unknown.
    return reversibility_of(reversibility)


def _ref(item: dict[str, Any]) -> dict[str, Any]:
    return {k: item[k] for k in ("sequence", "key", "action", "class", "why")}


def _by_class(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    groups = []
    for name in CLASSES:
        members = [i for i in items if i["class"] == name]
        if members:
            outcomes = Counter(i["outside_preview"] for i in members)
            groups.append(
                {
                    "class": name,
                    "meaning": CLASS_MEANING[name],
                    "count": len(members),
                    "actions": sorted({i["action"] for i in members}),
                    "outside_preview": dict(outcomes),
                }
            )
    return groups


def _summary(items: list[dict[str, Any]], pending: list[Any]) -> str:
    outcomes = Counter(i["outside_preview"] for i in items)
    parts = [f"{count} {what}" for what, count in sorted(outcomes.items())]
    text = f"Nothing reached the world. {len(items)} step(s) recorded dry" + (
        f": {'; '.join(parts)}." if parts else "."
    )
    if pending:
        text += f" {len(pending)} planned node(s) not evaluated yet: run_ready_steps evaluates them."
    return text


def _budget(items: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "steps": len(items),
        "risk_units": sum(risk_units(str(i["risk"])) for i in items),
        "by_risk": dict(Counter(str(i["risk"]) for i in items)),
        "over_budget": sorted({str(i["budget"]) for i in items if i["budget"]}),
    }


def _compensation_plan(saga: Saga, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What a rollback would run had the steps completed: newest first, as the real rollback does."""
    plan = []
    for item in reversed(items):
        if item["class"] == "read_only" and not item["has_compensation"]:
            continue
        plan.append(
            {
                "sequence": item["sequence"],
                "key": item["key"],
                "action": item["action"],
                "compensation": "runs its declared compensation"
                if item["has_compensation"]
                else "none declared: an operator must reconcile it by hand",
            }
        )
    return plan


def _promotions(saga: Saga) -> list[str]:
    events = AuditEvent.objects.filter(saga_id=saga.id, event_type=EventType.SAGA_PROMOTED).order_by("sequence")
    return [str(e.data.get("promoted_to")) for e in events]
