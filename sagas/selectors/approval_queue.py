"""The tenant's approval queue as keyset pages (the list_approvals operation): what waits for a human decision."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from governance.identity.principal import Principal
from governance.identity.rbac import READ, authorize
from sagas.models import Approval
from sagas.selectors import shapes
from sagas.selectors.approval_requests import pending_approvals
from sagas.selectors.approvals import ApprovalContext, approval_contexts
from sagas.selectors.pages import keyset_page


@dataclass(frozen=True)
class ApprovalPage:
    approvals: list[dict[str, Any]]
    next_cursor: str | None


def approvals_pending(*, actor: Principal, limit: int = 100, cursor: str | None = None) -> ApprovalPage:
    """Nodes of the actor's tenant waiting for a human decision, oldest request first, keyset-paginated.

    Each entry is the node (input included: the approver decides on it) with its saga's id and status, the
    pending approval request (who planned it, when it expires), and its approval_context: the input preview, the
    contract's risk, reversibility and compensation, why approval is required and the input digest it binds to.
    """
    authorize(actor, READ, "list_approvals")
    # Served by approval_status_created_idx (pending approvals, oldest first).
    query = (
        pending_approvals(actor)
        .select_related("node__saga")
        .prefetch_related("node__approvals", "node__dependency_links")
    )
    page = keyset_page(query, limit=limit, cursor=cursor, newest_first=False, start="the oldest pending approval")
    contexts = approval_contexts(page.rows)
    return ApprovalPage([_entry(a, contexts) for a in page.rows], page.next_cursor)


def _entry(approval: Approval, contexts: dict[uuid.UUID, ApprovalContext]) -> dict[str, Any]:
    node = approval.node
    return {
        **shapes.node_to_dict(node, contexts=contexts),
        "saga_id": str(node.saga_id),
        "saga_status": node.saga.status,
        "approval": shapes.approval_to_dict(approval),
    }
