"""The timeline: everything that happened to a saga, without payloads, for agents and the console's saga detail."""

from __future__ import annotations

from typing import Any

from audit.chain import verify_chain
from audit.models import AuditEvent
from governance.identity.principal import Principal
from governance.identity.rbac import READ, authorize
from sagas.selectors import shapes
from sagas.selectors.approvals import waiting_contexts
from sagas.selectors.audit_trail import MAX_EVENTS, audit_event_to_dict, bounded_limit
from sagas.selectors.scope import tenant_saga


def saga_timeline(*, actor: Principal, saga_id: object, limit: int | None = 1000) -> dict[str, Any]:
    """Steps, nodes, checkpoint names, approvals and audit events, without inputs, results, contract snapshots or
    checkpoint data, plus the chain's integrity. A waiting node's approval_context comes without its input preview."""
    authorize(actor, READ, "timeline")
    saga = tenant_saga(actor, saga_id)
    count = bounded_limit(limit, "limit", 1000, MAX_EVENTS)
    nodes = list(saga.nodes.prefetch_related("approvals", "dependency_links").order_by("position"))
    contexts = waiting_contexts(nodes)
    events = [audit_event_to_dict(e) for e in AuditEvent.objects.filter(saga_id=saga.id).order_by("sequence")[:count]]
    summary = shapes.saga_summary(saga, payload=False)
    node_dicts = [shapes.node_to_dict(n, payload=False, contexts=contexts) for n in nodes]
    integrity = verify_chain(saga.id).as_dict()
    return {
        "saga": summary,
        "steps": [shapes.step_to_dict(s, payload=False) for s in saga.steps.order_by("sequence")],
        "nodes": node_dicts,
        "checkpoints": [shapes.checkpoint_to_dict(c, payload=False) for c in saga.checkpoints.order_by("created_at")],
        "events": events,
        "integrity": integrity,
        **_seed_fields(summary, node_dicts, events, integrity),
    }


def _seed_fields(
    summary: dict[str, Any], nodes: list[dict[str, Any]], events: list[dict[str, Any]], integrity: dict[str, Any]
) -> dict[str, Any]:
    """The same facts under semantic-saga-mcp's names, so its clients read them where they always did: the saga's
    id, status and times at the top, nodes as `workflow_nodes` (each with `approval_status`), the events as `audit`
    and the chain's verdict as `audit_integrity`."""
    return {
        "saga_id": summary["id"],
        "status": summary["status"],
        "created_at": summary["created_at"],
        "updated_at": summary["updated_at"],
        "workflow_nodes": [{**node, "approval_status": (node["approval"] or {}).get("status")} for node in nodes],
        "audit": events,
        "audit_integrity": integrity,
    }
