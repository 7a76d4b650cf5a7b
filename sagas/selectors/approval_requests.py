"""The tenant's approval requests still waiting for a decision: the one query every list of them reads (the
console's queue, the REST approval list, `semantic-saga pending` and `status`).

Apart from what an approver judges of each (sagas.selectors.approvals: the input field by field, the pinned
contract's risk and reversibility, the rule that asked), so the terminal's `pending` and `status`, which list the
held calls and judge none, load none of it.
"""

from __future__ import annotations

from django.db.models import QuerySet

from governance.identity.principal import Principal
from sagas.models import Approval
from sagas.states import ApprovalStatus, NodeStatus


def pending_approvals(actor: Principal) -> QuerySet[Approval]:
    """The tenant's approval requests still waiting for a decision, on nodes still WAITING_APPROVAL (served by
    approval_status_created_idx). The console's queue and the REST approval list read through this one query."""
    return Approval.objects.filter(
        status=ApprovalStatus.PENDING, node__status=NodeStatus.WAITING_APPROVAL, node__saga__tenant_id=actor.tenant_id
    )
