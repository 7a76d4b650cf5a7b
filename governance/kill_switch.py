"""The kill switch: stop all new forward work of a tenant or of one saga, at once, on every worker.

Checked by the coordinator inside the same locked transaction that would start the work, so a switch engaged
while nodes sit in a queue stops them at their claim. Rollback and rejection are never stopped.
"""

from __future__ import annotations

import uuid

from django.db import IntegrityError, transaction
from django.db.models import Q

from governance.errors import ServiceError
from governance.identity import Principal
from governance.models import KillSwitch
from governance.rbac import authorize


def engaged(tenant_id: str, saga_id: uuid.UUID | None = None) -> KillSwitch | None:
    """The switch that stops this tenant or saga now, if any (the tenant-wide one first)."""
    scope = Q(saga_id__isnull=True) | Q(saga_id=saga_id) if saga_id else Q(saga_id__isnull=True)
    found: KillSwitch | None = KillSwitch.objects.filter(tenant_id=tenant_id).filter(scope).order_by("saga_id").first()
    return found


def kill_switch_engage(*, actor: Principal, reason: str, saga_id: uuid.UUID | None = None) -> KillSwitch:
    """Engage for the actor's tenant (or one of its sagas). Needs the admin capability. Idempotent."""
    authorize(actor, "kill_switch")
    if not reason.strip():
        raise ServiceError("INVALID_INPUT", "Say why the kill switch is engaged (reason); operators will read it.")
    try:
        with transaction.atomic(durable=True):
            switch, _ = KillSwitch.objects.get_or_create(
                tenant_id=actor.tenant_id,
                saga_id=saga_id,
                defaults={"engaged_by": actor.principal_id, "reason": reason},
            )
    except IntegrityError:  # engaged concurrently by someone else: the switch is on either way
        switch = KillSwitch.objects.get(tenant_id=actor.tenant_id, saga_id=saga_id)
    return switch


def kill_switch_release(*, actor: Principal, saga_id: uuid.UUID | None = None) -> bool:
    """Release the actor's tenant switch (or a saga's). Returns whether one was engaged."""
    authorize(actor, "kill_switch")
    with transaction.atomic(durable=True):
        deleted, _ = KillSwitch.objects.filter(tenant_id=actor.tenant_id, saga_id=saga_id).delete()
    return deleted > 0
