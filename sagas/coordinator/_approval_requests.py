"""Asking for an approval: the PENDING request a gated node (or a held proxied call) waits on.

Apart from sagas.coordinator.approvals (which decides requests) so the dependency bookkeeping (`_graph`), which
puts a gated node's request to approvers once its dependencies completed, can ask without an import cycle.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.conf import settings
from django.utils import timezone

from audit.models import EventType as E
from sagas.coordinator._tx import Tx
from sagas.models import Approval, Node
from sagas.selectors.approvals import input_digest
from sagas.states import ApprovalStatus


def request_approval(
    tx: Tx,
    node: Node,
    requested_by: str,
    *,
    expires_in: float | None = None,
    snapshot: dict[str, Any] | None = None,
) -> Approval:
    """A PENDING approval for `node`, bound to its contract hash and input digest. Audit APPROVAL_REQUESTED.

    `requested_by` says why: `contract`, `caller`, `policy:<rule ids>`, `retry` or `proxy:<gate source>`
    (sagas.selectors.approvals reads these back for the approver). `expires_in` (seconds) overrides the configured
    time to live (a proxied call's confirm timeout). `snapshot` is the contract snapshot the approval binds when no
    registry row holds it (a proxied call's, derived from the downstream tool).
    """
    ttl = settings.SAGA_APPROVAL_TTL_SECONDS if expires_in is None else expires_in
    approval = Approval.objects.create(
        node=node,
        requested_by=requested_by,
        definition_hash=node.action_definition_hash,
        snapshot=snapshot,
        input_digest=input_digest(node.input),
        expires_at=timezone.now() + timedelta(seconds=ttl) if ttl else None,
    )
    tx.record(
        E.APPROVAL_REQUESTED,
        node=node,
        status=ApprovalStatus.PENDING,
        data={"approval_id": str(approval.id), "requested_by": requested_by},
    )
    return approval
