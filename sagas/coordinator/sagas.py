"""Sagas: begin one, checkpoint a milestone, commit it. (Rollback is sagas.coordinator.rollback; promoting a
preview, sagas.coordinator.previews.)"""

from __future__ import annotations

import json
from typing import Any

from django.db.models import Q

from audit.models import EventType as E
from governance import kill_switch
from governance.identity.principal import Principal
from governance.identity.rbac import DECIDE, EXECUTE, authorize
from sagas.coordinator import _gates as gates
from sagas.coordinator import policy, quotas
from sagas.coordinator._deciders import not_a_person
from sagas.coordinator._tx import Refusal, locked_saga, new_saga_tx
from sagas.coordinator.sql import statements
from sagas.errors import InvalidInput, InvalidTransition
from sagas.models import Checkpoint, Saga
from sagas.states import RECOVERABLE_SAGA_STATES, NodeStatus, SagaKind, SagaStatus, StepStatus

# Caller metadata and checkpoint data are stored as given; a bound keeps one agent from bloating the database.
MAX_METADATA_BYTES = 64 * 1024
MAX_CHECKPOINT_BYTES = 1024 * 1024
# Metadata keys only the server writes: who began the saga, and what a proxy session is. A caller naming one is
# refused rather than silently overwritten, so nobody can pass a saga off as something it is not.
# `_engine` is the workflow state answers build at read time, as semantic-saga-mcp stored it (selectors.shapes).
RESERVED_METADATA_KEYS = ("_identity", "_engine", "proxy")
# Held proxied calls still waiting or running: they keep a proxy session from committing.
OPEN_PROXIED_NODE_STATES = (NodeStatus.WAITING_APPROVAL, NodeStatus.READY, NodeStatus.EXECUTING)


def _require_json_object(value: Any, name: str, limit: int) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise InvalidInput(message=f"{name} must be a JSON object, got {type(value).__name__}. Nothing was written.")
    try:
        size = len(json.dumps(value, ensure_ascii=False).encode("utf-8"))
    except (TypeError, ValueError) as exc:
        raise InvalidInput(message=f"{name} is not JSON-serializable ({exc}). Nothing was written.") from exc
    if size > limit:
        raise InvalidInput(
            message=f"{name} is {size} bytes, over the {limit}-byte limit. Nothing was written. "
            "Store large payloads elsewhere and keep a reference here."
        )
    return value


def saga_begin(*, actor: Principal, metadata: dict[str, Any] | None = None, preview: bool = False) -> Saga:
    """Start an ACTIVE saga for the actor's tenant.

    Effects: Saga(ACTIVE), audit SAGA_STARTED (data `preview: true` for a preview saga, whose steps are dry runs:
    sagas.coordinator.previews). `metadata._identity` is written by the server.
    Errors: INVALID_INPUT for non-object or oversized metadata, a reserved metadata key (RESERVED_METADATA_KEYS),
    or a non-boolean preview; QUOTA_EXCEEDED past SAGA_MAX_NEW_SAGAS_PER_MINUTE.
    """
    if isinstance(metadata, dict) and (reserved := sorted(set(metadata) & set(RESERVED_METADATA_KEYS))):
        raise InvalidInput(
            "RESERVED_METADATA_KEY",
            f"metadata may not hold {', '.join(repr(key) for key in reserved)}: the server writes "
            f"{' and '.join(RESERVED_METADATA_KEYS)} itself (who began the saga, and whether it is a proxy session, "
            "which only the MCP proxy opens). Nothing was written. Rename the key and begin again.",
        )
    return begin(actor=actor, metadata=metadata, preview=preview)


def begin(*, actor: Principal, metadata: dict[str, Any] | None, preview: bool, kind: SagaKind = SagaKind.SAGA) -> Saga:
    """saga_begin without the reserved-key check: for the coordinator's own sagas of another kind."""
    authorize(actor, EXECUTE, "begin")
    if not isinstance(preview, bool):
        raise InvalidInput(message="preview must be true or false.")
    if statements.tenant_stopped(actor.tenant_id) and (switch := kill_switch.engaged(actor.tenant_id)):
        what = "starting a saga"
        raise gates.kill_switch(f"tenant {actor.tenant_id}", switch.reason, switch.engaged_by, what)
    meta = dict(_require_json_object(metadata if metadata is not None else {}, "metadata", MAX_METADATA_BYTES))
    quotas.check_new_saga_rate(actor)
    meta["_identity"] = _identity(actor)
    saga = Saga(
        tenant_id=actor.tenant_id, creator_principal_id=actor.principal_id, metadata=meta, preview=preview, kind=kind
    )
    with new_saga_tx(saga, actor) as tx:
        tx.record(E.SAGA_STARTED, status=SagaStatus.ACTIVE, data={"preview": True} if preview else None)
    return saga


# semantic-saga-mcp's `identity_source` names, by how our surfaces authenticate the principal.
_LOCAL_PROTOCOLS = frozenset({"stdio", "mcp-proxy-stdio", "cli"})
_BEARER_PROTOCOLS = frozenset({"mcp", "mcp-proxy", "a2a", "rest"})


def _identity(actor: Principal) -> dict[str, Any]:
    """Ours beside semantic-saga-mcp's `roles` and `identity_source` (a bearer token: oauth-access-token; this
    machine's process: local-process; no authentication: anonymous-development; else our protocol's name)."""
    if not actor.authenticated:
        source = "anonymous-development"
    elif actor.protocol in _LOCAL_PROTOCOLS:
        source = "local-process"
    elif actor.protocol in _BEARER_PROTOCOLS:
        source = "oauth-access-token"
    else:
        source = actor.protocol
    return {**actor.identity_metadata(), "roles": sorted(actor.roles), "identity_source": source}


def saga_checkpoint(*, actor: Principal, saga_id: object, name: str, data: dict[str, Any] | None = None) -> Checkpoint:
    """Persist a named milestone. Needs ACTIVE or RECOVERY_REQUIRED. Audit CHECKPOINT_CREATED (name only, no data)."""
    authorize(actor, EXECUTE, "checkpoint")
    if not isinstance(name, str) or not name.strip() or len(name) > 200:
        raise InvalidInput(message="Checkpoint name must be a non-empty string of at most 200 characters.")
    payload = _require_json_object(data if data is not None else {}, "data", MAX_CHECKPOINT_BYTES)
    with locked_saga(saga_id, actor) as tx:
        if tx.saga.status not in RECOVERABLE_SAGA_STATES:
            raise InvalidTransition(
                "SAGA_NOT_ACTIVE",
                f"Saga {tx.saga.id} is {tx.saga.status}; checkpoints need ACTIVE or RECOVERY_REQUIRED. "
                "Nothing was written.",
            )
        checkpoint = Checkpoint.objects.create(saga=tx.saga, name=name, data=payload, principal_id=actor.principal_id)
        tx.record(E.CHECKPOINT_CREATED, data={"checkpoint_id": str(checkpoint.id), "name": name})
    return checkpoint


def _unfinished_steps(saga: Saga) -> int:
    if saga.is_proxy_session:
        # Refused and tool-error calls changed nothing; a call in flight or with an unknown outcome may have.
        return saga.steps.filter(Q(status=StepStatus.EXECUTING) | Q(uncertain_outcome=True)).count()
    return saga.steps.filter(node__isnull=True).exclude(status=StepStatus.COMPLETED).count()


def saga_commit(*, actor: Principal, saga_id: object) -> Saga:
    """Commit an ACTIVE saga whose planned nodes and immediate steps all COMPLETED.

    Effects: COMMITTED (terminal), audit SAGA_COMMITTED. Errors: SAGA_NOT_ACTIVE, UNFINISHED_NODES, UNFINISHED_STEPS.
    """
    authorize(actor, EXECUTE, "commit")
    with locked_saga(saga_id, actor) as tx:
        saga = tx.saga
        if saga.is_proxy_session:
            # Committing ends what an undo of the session could do: a person's decision, not the agent's.
            authorize(actor, DECIDE, "commit a proxy session")
            if refusal := not_a_person(actor, "commit a proxy session"):
                raise refusal
        if saga.preview:
            raise InvalidTransition(
                "PREVIEW_SAGA",
                f"Saga {saga.id} is a preview (a dry run): it never commits. Promote it (promote_preview) to run "
                "the same plan for real, or roll it back to discard it. Nothing was changed.",
            )
        if saga.status != SagaStatus.ACTIVE:
            raise InvalidTransition(
                "SAGA_NOT_ACTIVE",
                f"Saga {saga.id} is {saga.status} and cannot be committed; only ACTIVE sagas commit. "
                "Nothing was changed.",
            )
        nodes = saga.nodes.exclude(status=NodeStatus.COMPLETED)
        if saga.is_proxy_session:
            # A proxied call that was refused, denied or failed with a known outcome leaves nothing open.
            nodes = nodes.filter(status__in=OPEN_PROXIED_NODE_STATES)
        unfinished = list(nodes.order_by("position").values_list("id", "key", "status"))
        if unfinished:
            listed = ", ".join(f"{key or node_id} ({status})" for node_id, key, status in unfinished[:20])
            raise InvalidTransition(
                "UNFINISHED_NODES",
                f"Commit refused: {len(unfinished)} planned node(s) are not COMPLETED: {listed}. Nothing was "
                "committed. Run ready steps, approve or retry them, or roll the saga back.",
                nodes=[{"id": str(n), "key": k, "status": s} for n, k, s in unfinished],
            )
        bad_steps = _unfinished_steps(saga)
        if bad_steps:
            raise InvalidTransition(
                "UNFINISHED_STEPS",
                f"Commit refused: {bad_steps} immediate step(s) did not complete. Nothing was committed. "
                "Roll the saga back.",
            )
        if not (decision := policy.decide(tx, "commit")).allowed:
            raise Refusal(policy.refusal(decision, f"committing saga {saga.id}"))
        tx.transition(saga, SagaStatus.COMMITTED, event=E.SAGA_COMMITTED, error=None)
    return saga
