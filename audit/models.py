"""The append-only, per-saga hash-chained audit journal.

Rows are made only by `audit.chain.link`: the coordinator writes a saga's inside its transaction, `audit.chain.append`
a control-plane chain's. The hashed body is every field
except `sequence`, `previous_hash` and `event_hash`; `created_at_text` is the canonical timestamp string that is
hashed, so a database that re-renders timestamps cannot break verification.

`data` is small and payload-free by contract: never action inputs or results, HTTP bodies, secrets, checkpoint data
or approval reason text. Shapes per type: STEP_* {attempt, error_code?}, NODE_* {key?, depends_on?},
APPROVAL_* {approval_id, requested_by?}, CHECKPOINT_CREATED {checkpoint_id, name}, SAGA_* / ROLLBACK_* {counts},
UNDO_REQUESTED {force, to_checkpoint, checkpoint_id}, UNDO_LISTED {verdict, class}.

Operator changes (kill switch, action contracts, policy revision) are chained the same way in one control-plane
chain per tenant (`audit.control_plane`): `saga_id` then holds the chain id uuid5(CONTROL_PLANE_NAMESPACE, tenant),
and `ControlPlaneChain` is the row its appends lock. Shapes: KILL_SWITCH_* {scope, saga_id?, switch_id, ...},
ACTION_* {definition_hash, kind, previous?, file?}, POLICY_REVISION_CHANGED {backend, revision, policy_sha256,
previous}.
"""

from __future__ import annotations

import uuid

from django.db import models


class AuditEvent(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    # Plain values, not foreign keys: the audit app imports none of ours, and evidence must outlive its subject.
    saga_id = models.UUIDField(db_index=False)
    tenant_id = models.CharField(max_length=200)
    sequence = models.PositiveBigIntegerField()
    event_type = models.CharField(max_length=64)
    actor_principal_id = models.CharField(max_length=200)
    actor_type = models.CharField(max_length=32)
    action = models.CharField(max_length=200, blank=True, default="")
    action_version = models.CharField(max_length=64, blank=True, default="")
    step_id = models.CharField(max_length=64, blank=True, default="")
    node_id = models.CharField(max_length=64, blank=True, default="")
    status = models.CharField(max_length=32, blank=True, default="")
    data = models.JSONField(default=dict)
    trace_id = models.CharField(max_length=32, blank=True, default="")
    span_id = models.CharField(max_length=16, blank=True, default="")
    created_at_text = models.CharField(max_length=40)
    previous_hash = models.CharField(max_length=64, null=True, blank=True)  # noqa: DJ001 - null is the genesis link
    event_hash = models.CharField(max_length=64)

    class Meta:
        constraints = [
            # Serves chain reads in order, the head lookup on append, and refuses a forked chain.
            models.UniqueConstraint(fields=["saga_id", "sequence"], name="audit_event_saga_sequence_uniq"),
        ]
        indexes = [
            # Serves the audit admin's and the timeline's filter by tenant and type.
            models.Index(fields=["tenant_id", "event_type"], name="audit_event_tenant_type_idx"),
        ]
        ordering = ["saga_id", "sequence"]

    def __str__(self) -> str:
        return f"{self.saga_id}#{self.sequence} {self.event_type}"


class EventType(models.TextChoices):
    """Stored values never change: they are hashed into chains and matched by auditors' queries."""

    SAGA_STARTED = "SAGA_STARTED"
    SAGA_COMMITTED = "SAGA_COMMITTED"
    SAGA_FAILED = "SAGA_FAILED"
    RECOVERY_REQUIRED = "RECOVERY_REQUIRED"
    SAGA_RESUMED = "SAGA_RESUMED"
    NODE_PLANNED = "NODE_PLANNED"
    NODE_READY = "NODE_READY"
    NODE_BLOCKED = "NODE_BLOCKED"
    NODE_RETRIED = "NODE_RETRIED"
    NODE_COMPLETED = "NODE_COMPLETED"
    NODE_FAILED = "NODE_FAILED"
    APPROVAL_REQUESTED = "APPROVAL_REQUESTED"
    APPROVAL_GRANTED = "APPROVAL_GRANTED"
    APPROVAL_REJECTED = "APPROVAL_REJECTED"
    STEP_STARTED = "STEP_STARTED"
    STEP_COMPLETED = "STEP_COMPLETED"
    STEP_ATTEMPT_FAILED = "STEP_ATTEMPT_FAILED"
    STEP_RETRY_SCHEDULED = "STEP_RETRY_SCHEDULED"
    STEP_FAILED = "STEP_FAILED"
    STALE_WRITE_REFUSED = "STALE_WRITE_REFUSED"
    CHECKPOINT_CREATED = "CHECKPOINT_CREATED"
    ROLLBACK_STARTED = "ROLLBACK_STARTED"
    COMPENSATION_STARTED = "COMPENSATION_STARTED"
    COMPENSATION_ATTEMPT_FAILED = "COMPENSATION_ATTEMPT_FAILED"
    COMPENSATION_COMPLETED = "COMPENSATION_COMPLETED"
    COMPENSATION_SKIPPED = "COMPENSATION_SKIPPED"
    COMPENSATION_FAILED = "COMPENSATION_FAILED"
    ROLLBACK_COMPLETED = "ROLLBACK_COMPLETED"
    ROLLBACK_FAILED = "ROLLBACK_FAILED"
    ROLLBACK_REQUESTED = "ROLLBACK_REQUESTED"
    RUN_REQUESTED = "RUN_REQUESTED"
    RUN_STOPPED = "RUN_STOPPED"  # a run's remaining budget withdrawn (e.g. its MCP task cancelled)
    NODE_RECOVERED = "NODE_RECOVERED"
    STEP_RECOVERED = "STEP_RECOVERED"
    ROLLBACK_RESUMED = "ROLLBACK_RESUMED"
    POLICY_DECISION = "POLICY_DECISION"
    POLICY_SAFETY_OVERRIDE = "POLICY_SAFETY_OVERRIDE"
    KILL_SWITCH_REFUSED = "KILL_SWITCH_REFUSED"
    APPROVAL_EXPIRED = "APPROVAL_EXPIRED"
    # Preview sagas: a step evaluated without its side effect, and a preview promoted to a real saga.
    STEP_DRY = "STEP_DRY"
    # Proxied calls (the MCP proxy): a call journaled and refused by a gate, policy, the kill switch or a person.
    STEP_REFUSED = "STEP_REFUSED"
    # The undo of a proxy session: the options it was asked with (a resumed walk honours them), and each call it
    # can only list (a C call needs an operator's decision, an I or unknown one has no way back).
    UNDO_REQUESTED = "UNDO_REQUESTED"
    UNDO_LISTED = "UNDO_LISTED"
    SAGA_PROMOTED = "SAGA_PROMOTED"
    # Control-plane chains (audit.control_plane): operator changes, not saga work.
    KILL_SWITCH_ENGAGED = "KILL_SWITCH_ENGAGED"
    KILL_SWITCH_RELEASED = "KILL_SWITCH_RELEASED"
    ACTION_REGISTERED = "ACTION_REGISTERED"
    ACTION_ACTIVATED = "ACTION_ACTIVATED"
    ACTION_DEACTIVATED = "ACTION_DEACTIVATED"
    POLICY_REVISION_CHANGED = "POLICY_REVISION_CHANGED"
    # Tool definitions the MCP proxy trusts (registry.tool_pins): pinned on first use, seen changed (or new), and
    # accepted by an operator.
    TOOL_PINNED = "TOOL_PINNED"
    TOOL_DEFINITION_CHANGED = "TOOL_DEFINITION_CHANGED"
    TOOL_PIN_ACCEPTED = "TOOL_PIN_ACCEPTED"


class ControlPlaneChain(models.Model):
    """The head of one tenant's control-plane chain: the row an append locks, and a second copy of the head.

    Appends lock it (SELECT ... FOR NO KEY UPDATE), which serializes a tenant's operator changes the way the saga
    row serializes a saga's events. The stored head also lets `verify_audit` see the newest rows deleted, which a
    chain alone cannot show.
    """

    chain_id = models.UUIDField(primary_key=True, editable=False)
    tenant_id = models.CharField(max_length=200, unique=True)
    head_sequence = models.PositiveBigIntegerField(default=0)
    head_hash = models.CharField(max_length=64, null=True, blank=True)  # noqa: DJ001 - null: no event yet

    def __str__(self) -> str:
        return f"control plane {self.tenant_id} (head {self.head_sequence})"
