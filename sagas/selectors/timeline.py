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
    events = AuditEvent.objects.filter(saga_id=saga.id).order_by("sequence")[:count]
    return {
        "saga": shapes.saga_summary(saga, payload=False),
        "steps": [shapes.step_to_dict(s, payload=False) for s in saga.steps.order_by("sequence")],
        "nodes": [shapes.node_to_dict(n, payload=False, contexts=contexts) for n in nodes],
        "checkpoints": [shapes.checkpoint_to_dict(c, payload=False) for c in saga.checkpoints.order_by("created_at")],
        "events": [audit_event_to_dict(e) for e in events],
        "integrity": verify_chain(saga.id).as_dict(),
    }
