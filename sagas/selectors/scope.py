"""Tenant scope of every read and write: parse an id, see only the actor's tenant's sagas.

Another tenant's saga is indistinguishable from a missing one. The coordinator locks sagas through the same
`tenant_sagas` query (the write side may import reads; reads never import the write side).
"""

from __future__ import annotations

import uuid

from django.db.models import QuerySet

from governance.identity.principal import Principal
from sagas.errors import saga_not_found
from sagas.models import Saga


def parse_uuid(value: object) -> uuid.UUID | None:
    """`value` as a UUID, or None when it is not one (a caller's typo is then answered like a missing row)."""
    try:
        return value if isinstance(value, uuid.UUID) else uuid.UUID(str(value))
    except (ValueError, TypeError, AttributeError):
        return None


def tenant_sagas(actor: Principal) -> QuerySet[Saga]:
    return Saga.objects.filter(tenant_id=actor.tenant_id)


def tenant_saga(actor: Principal, saga_id: object) -> Saga:
    """The actor's tenant's saga, or SAGA_NOT_FOUND (also for another tenant's saga)."""
    parsed = parse_uuid(saga_id)
    # A primary-key lookup needs no ORDER BY (`.first()` would add one, and compiling it is a read's largest cost).
    found = list(tenant_sagas(actor).filter(pk=parsed)[:1]) if parsed else []
    if not found:
        raise saga_not_found(saga_id)
    return found[0]
