"""Quotas checked before anything is written: new sagas per principal per minute, concurrent runs per tenant.

Both are off (0) unless configured (docs/configuration.md, "Limits"): a deployment sizes them for its agents. They
count committed rows, so they hold across every process and surface; two requests racing at the limit may both
pass (the check is not part of the write), which a quota tolerates.
"""

from __future__ import annotations

import datetime as dt
import math
import uuid

from django.conf import settings
from django.utils import timezone

from governance.identity.principal import Principal
from sagas.errors import QuotaExceeded
from sagas.models import Node, Saga
from sagas.states import NodeStatus

WINDOW = dt.timedelta(minutes=1)


def check_new_saga_rate(actor: Principal) -> None:
    """QuotaExceeded when the actor began SAGA_MAX_NEW_SAGAS_PER_MINUTE sagas within the last minute."""
    limit = settings.SAGA_MAX_NEW_SAGAS_PER_MINUTE
    if not limit:
        return
    since = timezone.now() - WINDOW
    recent = Saga.objects.filter(
        tenant_id=actor.tenant_id, creator_principal_id=actor.principal_id, created_at__gte=since
    ).order_by("-created_at")
    made = list(recent.values_list("created_at", flat=True)[:limit])
    if len(made) < limit:
        return
    wait = max(1, math.ceil((made[-1] + WINDOW - timezone.now()).total_seconds()))
    raise QuotaExceeded(
        message=f"{actor.principal_id} began {limit} sagas within the last minute, which is what "
        f"SAGA_MAX_NEW_SAGAS_PER_MINUTE allows. Nothing was created. Try again in {wait} s, or finish work in the "
        "sagas you have; an operator can raise the limit.",
        retry_after_seconds=wait,
    )


def check_concurrent_runs(actor: Principal, saga_id: uuid.UUID) -> None:
    """QuotaExceeded when SAGA_MAX_CONCURRENT_RUNS_PER_TENANT other sagas of the tenant have a node running."""
    limit = settings.SAGA_MAX_CONCURRENT_RUNS_PER_TENANT
    if not limit:
        return
    running = (
        Node.objects.filter(saga__tenant_id=actor.tenant_id, status=NodeStatus.EXECUTING)
        .exclude(saga_id=saga_id)
        .values("saga_id")
        .distinct()[:limit]
    )
    count = len(list(running))
    if count >= limit:
        raise QuotaExceeded(
            message=f"Tenant {actor.tenant_id} has {count} sagas running nodes now, which is what "
            "SAGA_MAX_CONCURRENT_RUNS_PER_TENANT allows. Nothing was started. Run this saga again when one of them "
            "settles (get_saga shows what is in flight); an operator can raise the limit.",
        )
