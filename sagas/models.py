"""Saga state: sagas, workflow nodes and their dependencies, journal steps (and proxied calls' intents), approvals,
checkpoints.

Only `sagas.coordinator` writes these rows. The DAG is relational (Node + NodeDependency), never a JSON blob, so
"which nodes are ready" is one indexed query and two workers can lock disjoint nodes.
"""

from __future__ import annotations

import uuid

from django.db import models
from django.utils import timezone

from sagas.states import ApprovalStatus, NodeStatus, SagaKind, SagaStatus, StepStatus


class Saga(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    tenant_id = models.CharField(max_length=200)
    creator_principal_id = models.CharField(max_length=200)
    status = models.CharField(max_length=32, choices=SagaStatus.choices, default=SagaStatus.ACTIVE)
    # What the saga is (a plain saga or a proxy session), written once by the server; callers cannot choose it.
    kind = models.CharField(max_length=32, choices=SagaKind.choices, default=SagaKind.SAGA)
    metadata = models.JSONField(default=dict)
    error = models.JSONField(null=True, blank=True)
    preview = models.BooleanField(default=False)
    # Next journal step sequence; bumped under the saga row lock so sequences never collide.
    next_sequence = models.PositiveIntegerField(default=1)
    # Next node position (planning order), the tie-breaker that makes waves deterministic.
    next_position = models.PositiveIntegerField(default=1)
    # The audit chain's head (last sequence and event hash), read with the saga lock and written in the same
    # commit as the events, so an append costs no extra query. Verification never trusts it: it recomputes.
    audit_sequence = models.PositiveBigIntegerField(default=0)
    audit_head_hash = models.CharField(max_length=64, blank=True, default="")
    # The saga lease is the rollback runner's (ROLLING_BACK): one runner compensates a saga at a time.
    lease_owner = models.CharField(max_length=200, blank=True, default="")
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    fence_token = models.PositiveBigIntegerField(default=0)
    # The current run request: how many nodes may be in flight at once across all workers, and how many more
    # attempts it may start. Workers read these under the saga lock when claiming; 0 steps left = no run.
    run_max_parallel = models.PositiveSmallIntegerField(default=4)
    run_steps_left = models.PositiveIntegerField(default=0)
    # Who asked for the current run: workers act (and are audited) on that principal's behalf.
    run_principal_id = models.CharField(max_length=200, blank=True, default="")
    run_principal_type = models.CharField(max_length=32, blank=True, default="")
    # Automatic retries of a ROLLBACK_FAILED saga's compensations, with backoff.
    recovery_attempts = models.PositiveIntegerField(default=0)
    next_recovery_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        indexes = [
            # Serves the recovery sweep: sagas whose rollback is pending, running or to be retried.
            models.Index(
                fields=["status", "lease_expires_at"],
                condition=models.Q(lease_expires_at__isnull=False)
                | models.Q(status__in=["FAILED", "ROLLING_BACK", "ROLLBACK_FAILED"]),
                name="saga_recovery_idx",
            ),
            # Serves list_sagas: tenant, optional status, newest first, keyset-paginated on (created_at, id).
            models.Index(fields=["tenant_id", "status", "-created_at"], name="saga_tenant_status_created_idx"),
            models.Index(fields=["tenant_id", "-created_at", "-id"], name="saga_tenant_created_idx"),
        ]

    def __str__(self) -> str:
        return f"saga {self.id} ({self.status})"

    @property
    def is_proxy_session(self) -> bool:
        """A session of the MCP proxy: its calls are proxied steps and its rollback is the proxy's undo walk."""
        return self.kind == SagaKind.PROXY_SESSION


class Node(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    saga = models.ForeignKey(Saga, on_delete=models.CASCADE, related_name="nodes")
    key = models.CharField(max_length=200, null=True, blank=True)  # noqa: DJ001 - NULL keys stay out of the unique index
    position = models.PositiveIntegerField()
    action = models.CharField(max_length=200)
    action_version = models.CharField(max_length=64)
    action_definition_hash = models.CharField(max_length=64)
    input = models.JSONField(default=dict)
    status = models.CharField(max_length=32, choices=NodeStatus.choices)
    approval_required = models.BooleanField(default=False)
    attempts = models.PositiveIntegerField(default=0)
    next_attempt_at = models.DateTimeField(null=True, blank=True)
    # When the last nudge for this READY node was sent; the sweeper re-sends nudges that were lost.
    dispatched_at = models.DateTimeField(null=True, blank=True)
    uncertain_outcome = models.BooleanField(default=False)
    result = models.JSONField(null=True, blank=True)
    error = models.JSONField(null=True, blank=True)
    step = models.OneToOneField("Step", null=True, blank=True, on_delete=models.SET_NULL, related_name="node_of")
    lease_owner = models.CharField(max_length=200, blank=True, default="")
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    fence_token = models.PositiveBigIntegerField(default=0)
    planned_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["saga", "key"], condition=models.Q(key__isnull=False), name="node_saga_key_uniq"
            ),
            models.UniqueConstraint(fields=["saga", "position"], name="node_saga_position_uniq"),
        ]
        indexes = [
            # Serves the ready-node claim: READY nodes of one saga whose backoff has passed, in planning order.
            models.Index(fields=["saga", "status", "position"], name="node_saga_status_pos_idx"),
            # Serves the recovery sweep: EXECUTING nodes whose lease expired, and READY nodes whose nudge was lost.
            models.Index(
                fields=["lease_expires_at"],
                condition=models.Q(status="EXECUTING"),
                name="node_executing_lease_idx",
            ),
            models.Index(
                fields=["dispatched_at"],
                condition=models.Q(status="READY"),
                name="node_ready_dispatch_idx",
            ),
        ]
        ordering = ["saga", "position"]

    def __str__(self) -> str:
        return f"node {self.key or self.id} {self.action}@{self.action_version} ({self.status})"


class NodeDependency(models.Model):
    node = models.ForeignKey(Node, on_delete=models.CASCADE, related_name="dependency_links")
    depends_on = models.ForeignKey(Node, on_delete=models.CASCADE, related_name="dependant_links")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["node", "depends_on"], name="node_dependency_uniq")]

    def __str__(self) -> str:
        return f"{self.node_id} -> {self.depends_on_id}"


class Step(models.Model):
    """The write-ahead journal: a step row exists as EXECUTING before its side effect is attempted (for a proxied call
    journaled by its intent, the ProxyCallIntent row does, and the step is written with the call's outcome).

    `id` is the idempotency identity: every forward retry reuses it, compensation uses `<id>:rollback`.
    """

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    saga = models.ForeignKey(Saga, on_delete=models.CASCADE, related_name="steps")
    sequence = models.PositiveIntegerField()
    node = models.ForeignKey(Node, null=True, blank=True, on_delete=models.SET_NULL, related_name="steps")
    action = models.CharField(max_length=200)
    action_version = models.CharField(max_length=64)
    action_definition_hash = models.CharField(max_length=64)
    action_definition = models.JSONField()
    input = models.JSONField(default=dict)
    status = models.CharField(max_length=32, choices=StepStatus.choices)
    result = models.JSONField(null=True, blank=True)
    error = models.JSONField(null=True, blank=True)
    compensation_result = models.JSONField(null=True, blank=True)
    compensation_error = models.JSONField(null=True, blank=True)
    attempts = models.PositiveIntegerField(default=0)
    compensation_attempts = models.PositiveIntegerField(default=0)
    uncertain_outcome = models.BooleanField(default=False)
    fence_token = models.PositiveBigIntegerField(default=0)
    # Only immediate steps (node is NULL) hold a lease here; a node attempt's lease is on its node.
    lease_owner = models.CharField(max_length=200, blank=True, default="")
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["saga", "sequence"], name="step_saga_sequence_uniq")]
        indexes = [
            # Serves the recovery sweep: immediate steps whose caller stopped renewing the lease.
            models.Index(
                fields=["lease_expires_at"],
                condition=models.Q(status="EXECUTING", node__isnull=True),
                name="step_immediate_lease_idx",
            ),
        ]
        ordering = ["saga", "sequence"]

    def __str__(self) -> str:
        return f"step {self.sequence} {self.action}@{self.action_version} ({self.status})"


class ProxyCallIntent(models.Model):
    """A proxied call about to be sent, journaled in one statement before it is: the stdio proxy's write-ahead for a
    plain allowed call while no tenant policy is configured (sagas.coordinator.proxy.intents). Its step and audit
    events are written behind the answer, with its outcome. Any other transaction on the session first turns the
    intents it finds into EXECUTING steps, and the recovery sweep does so with one whose lease lapsed (its proxy
    died): then its outcome is recorded as unknown, exactly as for a step journaled ahead."""

    id = models.UUIDField(primary_key=True, editable=False)  # the step's id to be, and the call's idempotency key
    saga = models.ForeignKey(Saga, on_delete=models.CASCADE, related_name="+")
    call = models.TextField()  # the call's facts (sagas.proxied_facts.CallFacts) as JSON
    arguments = models.JSONField(default=dict)
    principal_id = models.CharField(max_length=200)  # who made the call: its step's STARTED event names them
    principal_type = models.CharField(max_length=40)
    lease_owner = models.CharField(max_length=200)
    lease_expires_at = models.DateTimeField()
    created_at = models.DateTimeField()  # the order of a session's intents

    class Meta:
        indexes = [models.Index(fields=["lease_expires_at"], name="proxy_intent_lease_idx")]  # the sweep's

    def __str__(self) -> str:
        return f"proxied call intent {self.id}"


class Approval(models.Model):
    """A human decision bound to one node, its pinned definition hash and a digest of its input.

    The reason text lives only here: it is never copied into audit events.
    """

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    node = models.ForeignKey(Node, on_delete=models.CASCADE, related_name="approvals")
    status = models.CharField(max_length=16, choices=ApprovalStatus.choices, default=ApprovalStatus.PENDING)
    requested_by = models.CharField(max_length=200)
    decided_by = models.CharField(max_length=200, blank=True, default="")
    reason = models.TextField(null=True, blank=True)  # noqa: DJ001 - null = no reason given (distinct from "")
    definition_hash = models.CharField(max_length=64)
    # The contract snapshot the approval binds, when no registry row holds it: a held proxied call's (derived from
    # the downstream tool's definition), so an approver sees what would run and the call can be journaled later.
    snapshot = models.JSONField(null=True, blank=True)
    input_digest = models.CharField(max_length=64)
    created_at = models.DateTimeField(auto_now_add=True)
    decided_at = models.DateTimeField(null=True, blank=True)
    expires_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [
            # Serves the approval queue: pending approvals, oldest first.
            models.Index(fields=["status", "created_at"], name="approval_status_created_idx"),
        ]
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"approval {self.id} ({self.status})"


class Checkpoint(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    saga = models.ForeignKey(Saga, on_delete=models.CASCADE, related_name="checkpoints")
    name = models.CharField(max_length=200)
    data = models.JSONField(default=dict)
    principal_id = models.CharField(max_length=200)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["saga", "created_at"]

    def __str__(self) -> str:
        return f"checkpoint {self.name}"


class A2ATask(models.Model):
    """An A2A protocol task: a peer's handle on one command, kept for the SDK's TaskStore interface
    (sagas.protocols.a2a.task_store). The protobuf Task is stored whole as protobuf-JSON in `task`; the columns beside
    it serve lookups and the admin. Distinct from a saga: the task id is the protocol-level handoff, saga_id the
    transactional handle (one saga is usually driven by many tasks).

    Tasks are tenant-scoped: every peer of a tenant may read the tenant's tasks, other tenants never see them.
    """

    id = models.CharField(primary_key=True, max_length=100)  # the SDK's task id (a UUID it generates)
    tenant_id = models.CharField(max_length=200)
    context_id = models.CharField(max_length=200)
    state = models.CharField(max_length=40)  # TaskState name, e.g. TASK_STATE_COMPLETED
    operation = models.CharField(max_length=40, blank=True, default="")  # the command's operation, for operators
    saga_id = models.CharField(max_length=100, blank=True, default="")  # the saga it acted on, when there is one
    task = models.JSONField()
    created_at = models.DateTimeField(auto_now_add=True)
    # The task status's own timestamp: ListTasks orders and pages on it, as the protocol defines.
    updated_at = models.DateTimeField()

    class Meta:
        indexes = [
            # Serves ListTasks: a tenant's tasks, newest first, keyset-paginated on (updated_at, id).
            models.Index(fields=["tenant_id", "-updated_at", "-id"], name="a2a_task_tenant_updated_idx"),
            # Serves ListTasks filtered by contextId (a peer's conversation).
            models.Index(fields=["tenant_id", "context_id", "-updated_at"], name="a2a_task_tenant_context_idx"),
            # Serves ListTasks filtered by status.
            models.Index(fields=["tenant_id", "state", "-updated_at"], name="a2a_task_tenant_state_idx"),
        ]

    def __str__(self) -> str:
        return f"A2A task {self.id} {self.operation} ({self.state})"


class McpTask(models.Model):
    """An MCP task: a client's durable handle on one request answered later (2025-11-25 experimental tasks and the
    2026-07-28 `io.modelcontextprotocol/tasks` extension), written by sagas.protocols.mcp.tasks only. Protocol
    state, not saga state: `saga_id`/`node_id` say what the task waits on (a held proxied call's node), and the
    coordinator decides that node through the operation table as for any other surface.

    Scoped to the principal that created it (tasks/get, tasks/list, tasks/cancel of anyone else answer "not
    found"). `result` is the answer the client will get (for a forwarded call, the downstream's result exactly as
    it came, unscrubbed, which is why it never reaches audit, logs or the admin); the row goes after `expires_at`.
    """

    id = models.CharField(primary_key=True, max_length=64)  # the taskId (a random UUID)
    tenant_id = models.CharField(max_length=200)
    principal_id = models.CharField(max_length=200)
    kind = models.CharField(max_length=60)  # who finishes it, e.g. "proxy.held_call" (mcp_tasks.TaskKind)
    method = models.CharField(max_length=60, default="tools/call")  # the request the task answers
    protocol_version = models.CharField(max_length=20)  # of the request that created it
    saga_id = models.CharField(max_length=100, blank=True, default="")
    node_id = models.CharField(max_length=100, blank=True, default="")
    status = models.CharField(max_length=20)  # working | input_required | completed | failed | cancelled
    status_message = models.TextField(blank=True, default="")
    request = models.JSONField(default=dict)  # what its kind needs to finish it in any process
    result = models.JSONField(null=True, blank=True)  # the request's result once terminal
    error = models.JSONField(null=True, blank=True)  # the JSON-RPC error of a failed task
    ttl_ms = models.BigIntegerField(null=True)
    poll_interval_ms = models.PositiveIntegerField(default=1000)
    # The process driving it toward its end (a lease it renews): another process takes over once it lapses.
    driver = models.CharField(max_length=200, blank=True, default="")
    driver_until = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)  # not auto_now_add: the store sets both times at once
    updated_at = models.DateTimeField()
    expires_at = models.DateTimeField(null=True)

    class Meta:
        indexes = [
            # Serves tasks/list: one principal's tasks, newest first, keyset-paginated on (created_at, id).
            models.Index(fields=["tenant_id", "principal_id", "-created_at", "-id"], name="mcp_task_owner_idx"),
            # Serves the purge of expired tasks.
            models.Index(fields=["expires_at"], name="mcp_task_expires_idx"),
        ]

    def __str__(self) -> str:
        return f"MCP task {self.id} ({self.status})"
