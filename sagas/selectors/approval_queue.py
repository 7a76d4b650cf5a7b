"""The tenant's approval queue as keyset pages (the list_approvals operation): what waits for a human decision."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from django.db.models import Q

from governance.identity.principal import Principal
from governance.identity.rbac import READ, authorize
from sagas.errors import InvalidInput
from sagas.models import Approval
from sagas.selectors import shapes
from sagas.selectors.approvals import ApprovalContext, approval_contexts, pending_approvals
from sagas.selectors.pages import decode_keyset_cursor, encode_keyset_cursor


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
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= 500:
        raise InvalidInput(message=f"limit must be an integer from 1 to 500, got {limit!r}.")
    # Served by approval_status_created_idx (pending approvals, oldest first).
    query = (
        pending_approvals(actor)
        .select_related("node__saga")
        .prefetch_related("node__approvals", "node__dependency_links")
    )
    if cursor:
        created, approval_id = decode_keyset_cursor(cursor, start="the oldest pending approval")
        query = query.filter(Q(created_at__gt=created) | Q(created_at=created, id__gt=approval_id))
    rows = list(query.order_by("created_at", "id")[: limit + 1])
    more = len(rows) > limit
    rows = rows[:limit]
    contexts = approval_contexts(rows)
    return ApprovalPage([_entry(a, contexts) for a in rows], next_cursor(rows, more))


def next_cursor(rows: list[Approval], more: bool) -> str | None:
    return encode_keyset_cursor(rows[-1].created_at, rows[-1].id) if more and rows else None


def _entry(approval: Approval, contexts: dict[uuid.UUID, ApprovalContext]) -> dict[str, Any]:
    node = approval.node
    return {
        **shapes.node_to_dict(node, contexts=contexts),
        "saga_id": str(node.saga_id),
        "saga_status": node.saga.status,
        "approval": shapes.approval_to_dict(approval),
    }
