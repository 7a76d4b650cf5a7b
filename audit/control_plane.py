"""Control-plane chains: operator changes (kill switch, action contracts, policy revision) as hash-chained evidence.

One chain per tenant beside the per-saga chains, in the same table and under the same hash rule
(docs/audit_hash.md). The chain id, stored in `saga_id`, is uuid5(CONTROL_PLANE_NAMESPACE, tenant_id): a version-5
UUID can never equal a saga's version-4 id, and `audit.chain` appends and verifies it unchanged. Changes that
belong to no tenant (the action registry and the policy file are deployment-wide) go to the chain of
SYSTEM_TENANT, the same "every tenant" name the policy file uses for its wildcard section.

Call `lock_chain` first inside the transaction that makes the change, then `append_changes`: the change and its
evidence commit together, and a tenant's changes are chained in the order they were made. `record_changes` does
both when the change needs no lock of its own ordering.
"""

from __future__ import annotations

import getpass
import os
import socket
import uuid
from dataclasses import dataclass
from typing import Any

from django.db import transaction

from audit import telemetry
from audit.chain import EventDraft, append
from audit.models import AuditEvent, ControlPlaneChain, EventType

# Fixed forever: chain ids derive from it, and auditors recompute them.
CONTROL_PLANE_NAMESPACE = uuid.UUID("2de63ffe-ec7b-423d-84fa-80502e463597")
SYSTEM_TENANT = "*"
# The event types only control-plane chains hold.
EVENT_TYPES = frozenset(
    {
        EventType.KILL_SWITCH_ENGAGED,
        EventType.KILL_SWITCH_RELEASED,
        EventType.ACTION_REGISTERED,
        EventType.ACTION_ACTIVATED,
        EventType.ACTION_DEACTIVATED,
        EventType.POLICY_REVISION_CHANGED,
        EventType.TOOL_PINNED,
        EventType.TOOL_DEFINITION_CHANGED,
        EventType.TOOL_PIN_ACCEPTED,
    }
)


@dataclass(frozen=True)
class Actor:
    """Who made an operator change: an admin user (`user:ada`), a CLI invocation (`cli:root`), a process."""

    principal_id: str
    principal_type: str


def chain_id(tenant_id: str) -> uuid.UUID:
    return uuid.uuid5(CONTROL_PLANE_NAMESPACE, tenant_id)


def is_control_plane(chain: uuid.UUID | str, tenant_id: str) -> bool:
    """Whether the chain with this id and tenant is the tenant's control-plane chain (computed, no query)."""
    return str(chain) == str(chain_id(tenant_id))


def os_user() -> str:
    """The operating-system account running this process (containers may have no passwd entry for it)."""
    try:
        return getpass.getuser()
    except (OSError, KeyError):
        return f"uid{os.getuid()}" if hasattr(os, "getuid") else "unknown"


def cli_actor() -> Actor:
    """A management command run by hand: the OS account is the best identity a shell offers."""
    return Actor(f"cli:{os_user()}", "cli")


def process_actor() -> Actor:
    """A server or worker acting on its configuration (a registry file loaded at start, a policy file reloaded)."""
    return Actor(f"process:{os_user()}@{socket.gethostname()}", "process")


def change(
    event_type: str,
    actor: Actor,
    *,
    action: str = "",
    action_version: str = "",
    status: str = "",
    data: dict[str, Any] | None = None,
) -> EventDraft:
    """One control-plane event. `data` names what changed (ids, versions, hashes, states), never secrets."""
    trace_id, span_id = telemetry.current_ids()
    return EventDraft(
        event_type=event_type,
        actor_principal_id=actor.principal_id,
        actor_type=actor.principal_type,
        action=action,
        action_version=action_version,
        status=status,
        data=data or {},
        trace_id=trace_id,
        span_id=span_id,
    )


def lock_chain(tenant_id: str) -> ControlPlaneChain:
    """Lock the tenant's chain head (created on first use) until the surrounding transaction ends."""
    chain = chain_id(tenant_id)
    # INSERT ... ON CONFLICT DO NOTHING: two first changes of a tenant at once both end up locking the one row.
    ControlPlaneChain.objects.bulk_create(
        [ControlPlaneChain(chain_id=chain, tenant_id=tenant_id)], ignore_conflicts=True
    )
    head: ControlPlaneChain = ControlPlaneChain.objects.select_for_update(no_key=True).get(chain_id=chain)
    return head


def append_changes(head: ControlPlaneChain, drafts: list[EventDraft]) -> list[AuditEvent]:
    """Append to the chain whose head `lock_chain` returned, in the same transaction, and move the head."""
    if not drafts:
        return []
    # A head row at 0 is new (or was deleted and recreated): read the chain itself rather than fork it.
    known = (head.head_sequence, head.head_hash) if head.head_sequence else None
    events = append(saga_id=head.chain_id, tenant_id=head.tenant_id, drafts=drafts, head=known)
    head.head_sequence, head.head_hash = events[-1].sequence, events[-1].event_hash
    head.save(update_fields=["head_sequence", "head_hash"])
    return events


def record_changes(tenant_id: str, drafts: list[EventDraft]) -> list[AuditEvent]:
    """Lock and append in one step (joins the caller's transaction; nothing is written for no drafts)."""
    if not drafts:
        return []
    with transaction.atomic(savepoint=False):
        return append_changes(lock_chain(tenant_id), drafts)


def last_change_data(tenant_id: str, event_type: str) -> dict[str, Any] | None:
    """The `data` of the newest event of this type in the tenant's chain, or None if there is none."""
    data: dict[str, Any] | None = (
        AuditEvent.objects.filter(saga_id=chain_id(tenant_id), event_type=event_type)
        .order_by("-sequence")
        .values_list("data", flat=True)
        .first()
    )
    return data
