"""The kill switch: stop all new forward work of a tenant or of one saga, at once, on every worker.

Checked by the coordinator inside the same locked transaction that would start the work, so a switch engaged
while nodes sit in a queue stops them at their claim. Rollback and rejection are never stopped.

Engaging and releasing are operator changes: each one that changes something writes KILL_SWITCH_ENGAGED or
KILL_SWITCH_RELEASED to the tenant's control-plane chain (audit.control_plane) in the same transaction. The
chain's lock is taken first, so concurrent engagements of one tenant are serialized and chained in order.
"""

from __future__ import annotations

import hashlib
import uuid
from typing import Any

from django.db import transaction
from django.db.models import Q

from audit import control_plane
from audit.chain import EventDraft
from audit.models import EventType
from governance.errors import ServiceError
from governance.identity.principal import Principal
from governance.identity.rbac import ADMIN, authorize
from governance.models import KillSwitch


def engaged(tenant_id: str, saga_id: uuid.UUID | None = None) -> KillSwitch | None:
    """The switch that stops this tenant or saga now, if any (the tenant-wide one first)."""
    scope = Q(saga_id__isnull=True) | Q(saga_id=saga_id) if saga_id else Q(saga_id__isnull=True)
    found: KillSwitch | None = KillSwitch.objects.filter(tenant_id=tenant_id).filter(scope).order_by("saga_id").first()
    return found


def kill_switch_engage(*, actor: Principal, reason: str, saga_id: uuid.UUID | None = None) -> KillSwitch:
    """Engage for the actor's tenant (or one of its sagas). Needs the admin capability. Idempotent: engaging an
    engaged switch keeps the first one (and its reason) and records nothing."""
    authorize(actor, ADMIN, "kill_switch")
    if not reason.strip():
        raise ServiceError("INVALID_INPUT", "Say why the kill switch is engaged (reason); operators will read it.")
    with transaction.atomic(durable=True):
        chain = control_plane.lock_chain(actor.tenant_id)
        switch, created = KillSwitch.objects.get_or_create(
            tenant_id=actor.tenant_id,
            saga_id=saga_id,
            defaults={"engaged_by": actor.principal_id, "reason": reason},
        )
        if created:
            # The reason is free text (like an approval's): the chain keeps its digest, not the words.
            digest = hashlib.sha256(reason.encode()).hexdigest()
            event = _event(EventType.KILL_SWITCH_ENGAGED, actor, switch, "engaged", reason_sha256=digest)
            control_plane.append_changes(chain, [event])
    return switch


def kill_switch_release(*, actor: Principal, saga_id: uuid.UUID | None = None) -> bool:
    """Release the actor's tenant switch (or a saga's). Returns whether one was engaged."""
    authorize(actor, ADMIN, "kill_switch")
    with transaction.atomic(durable=True):
        chain = control_plane.lock_chain(actor.tenant_id)
        switch = KillSwitch.objects.filter(tenant_id=actor.tenant_id, saga_id=saga_id).first()
        if switch is None:
            return False
        event = _event(
            EventType.KILL_SWITCH_RELEASED,
            actor,
            switch,
            "released",
            engaged_by=switch.engaged_by,
            engaged_at=switch.engaged_at.isoformat(),
        )
        switch.delete()
        control_plane.append_changes(chain, [event])
    return True


def _event(event_type: str, actor: Principal, switch: KillSwitch, status: str, **details: Any) -> EventDraft:
    data: dict[str, Any] = {"switch_id": switch.pk, "scope": "saga" if switch.saga_id else "tenant", **details}
    if switch.saga_id:
        data["saga_id"] = str(switch.saga_id)
    return control_plane.change(
        event_type, control_plane.Actor(actor.principal_id, actor.principal_type), status=status, data=data
    )
