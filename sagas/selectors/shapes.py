"""The result shapes agents see (those of semantic-saga-mcp): fields may be added, never renamed or dropped."""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from registry.models import ActionDefinition
from registry.selectors import builtin_implementation
from sagas.models import Approval, Checkpoint, Node, Saga, Step
from sagas.selectors.approvals import ApprovalContext, approval_context, pending_of, waiting_contexts
from sagas.selectors.undo_outcome import undo_outcome
from sagas.states import SagaKind

# semantic-saga-mcp's `workflow.version`: the shape of the workflow object, 1 on both servers.
WORKFLOW_VERSION = 1


def _ts(value: datetime | None) -> str | None:
    return value.isoformat() if value else None


def step_to_dict(step: Step, *, payload: bool = True) -> dict[str, Any]:
    out: dict[str, Any] = {
        "id": str(step.id),
        "saga_id": str(step.saga_id),
        "sequence": step.sequence,
        "node_id": str(step.node_id) if step.node_id else None,
        "action": step.action,
        "action_version": step.action_version,
        "action_definition_hash": step.action_definition_hash,
        "status": step.status,
        "error": step.error,
        "compensation_error": step.compensation_error,
        "attempts": step.attempts,
        "compensation_attempts": step.compensation_attempts,
        "uncertain_outcome": step.uncertain_outcome,
        "created_at": _ts(step.created_at),
        "updated_at": _ts(step.updated_at),
    }
    if payload:
        out.update(
            action_definition=shown_definition(step.action_definition),
            input=step.input,
            result=step.result,
            compensation_result=step.compensation_result,
        )
    return out


def shown_definition(snapshot: Any) -> Any:
    """A pinned contract snapshot as answers show it: the snapshot, plus semantic-saga-mcp's `implementation` and
    `implementation_hash` for a builtin (the code that runs it now, as get_action gives them).

    Those two keys are presentation: no contract may hold them (the registry schema refuses them), and the pinned
    `action_definition_hash` is over the snapshot without them, so dropping them recomputes it."""
    if not isinstance(snapshot, dict) or snapshot.get("kind") != "builtin":
        return snapshot
    return {**snapshot, **builtin_implementation(snapshot)}


def approval_to_dict(approval: Approval | None) -> dict[str, Any] | None:
    if approval is None:
        return None
    return {
        "id": str(approval.id),
        "status": approval.status,
        "principal_id": approval.decided_by or None,
        "reason": approval.reason,
        "requested_by": approval.requested_by,
        "decided_at": _ts(approval.decided_at),
        "expires_at": _ts(approval.expires_at),
        # What the decision binds to: the coordinator runs the node only while both still match.
        "definition_hash": approval.definition_hash,
        "input_digest": approval.input_digest,
    }


def node_to_dict(
    node: Node, *, payload: bool = True, contexts: Mapping[uuid.UUID, ApprovalContext] | None = None
) -> dict[str, Any]:
    """`contexts` (selectors.approvals.waiting_contexts) saves a lookup per waiting node when shaping many."""
    approvals = list(node.approvals.all())
    out: dict[str, Any] = {
        "id": str(node.id),
        "key": node.key,
        "action": node.action,
        "action_version": node.action_version,
        "action_definition_hash": node.action_definition_hash,
        "depends_on": [str(link.depends_on_id) for link in node.dependency_links.all()],
        "status": node.status,
        "approval_required": node.approval_required,
        "approval": approval_to_dict(max(approvals, key=lambda a: a.created_at) if approvals else None),
        "step_id": str(node.step_id) if node.step_id else None,
        "attempts": node.attempts,
        "next_attempt_at": _ts(node.next_attempt_at),
        "error": node.error,
        "uncertain_outcome": node.uncertain_outcome,
        "planned_at": _ts(node.planned_at),
        "updated_at": _ts(node.updated_at),
        "approval_context": _waiting_context(node, approvals, payload, contexts),
    }
    if payload:
        out.update(input=node.input, result=node.result)
    return out


def _waiting_context(
    node: Node, approvals: list[Approval], payload: bool, contexts: Mapping[uuid.UUID, ApprovalContext] | None
) -> dict[str, Any] | None:
    """What an approver judges, while the node waits for one (None otherwise)."""
    pending = pending_of(node, approvals)
    if pending is None:
        return None
    context = contexts.get(pending.id) if contexts is not None else None
    return (context or approval_context(pending)).as_dict(payload=payload)


def checkpoint_to_dict(checkpoint: Checkpoint, *, payload: bool = True) -> dict[str, Any]:
    out = {
        "id": str(checkpoint.id),
        "name": checkpoint.name,
        "principal_id": checkpoint.principal_id,
        "created_at": _ts(checkpoint.created_at),
    }
    if payload:
        out["data"] = checkpoint.data
    return out


def session_id(tenant_id: str) -> str:
    """semantic-saga-mcp's `session_id`: the scope that owns a saga. Ownership is the tenant's on both servers, and
    the value is the one it gave: "tenant:" and the SHA-256 of the tenant id."""
    return "tenant:" + hashlib.sha256(tenant_id.encode("utf-8")).hexdigest()


def saga_summary(saga: Saga, *, payload: bool = True) -> dict[str, Any]:
    out = {
        "id": str(saga.id),
        "session_id": session_id(saga.tenant_id),
        "tenant_id": saga.tenant_id,
        "creator_principal_id": saga.creator_principal_id,
        "status": saga.status,
        "metadata": saga.metadata,
        # semantic-saga-mcp's `error` is the failure's text; the whole object (code, message, ...) is error_detail.
        "error": error_text(saga.error),
        "error_detail": saga.error,
        "created_at": _ts(saga.created_at),
        "updated_at": _ts(saga.updated_at),
    }
    if not payload:
        out.pop("metadata")
    if saga.kind == SagaKind.PROXY_SESSION and (outcome := undo_outcome(saga)) is not None:
        out["undo"] = outcome.as_json()  # how its undo ended: undone, or what it left (sagas.selectors.undo_outcome)
    return out


def error_text(error: Any) -> str | None:
    """An error object's message (its code when it has none); a text as it is; None for no error."""
    if error is None or isinstance(error, str):
        return error
    if isinstance(error, dict):
        for key in ("message", "code"):
            if isinstance(error.get(key), str) and error[key]:
                return str(error[key])
    return json.dumps(error, sort_keys=True, default=str)


def new_saga_to_dict(saga: Saga) -> dict[str, Any]:
    """`saga_to_dict` of a saga created a moment ago by this call: it has no steps, nodes or checkpoints yet, so
    nothing is read back to say so."""
    return {**saga_summary(saga), "steps": []}


def saga_to_dict(saga: Saga, *, read_just_now: bool = False) -> dict[str, Any]:
    """The full saga: steps, and the workflow (nodes, checkpoints) when it has planned nodes or checkpoints.

    With `read_just_now` (the row was read for this answer), its counters say whether any step or node was ever
    journaled (every Step and Node is numbered from them), so a saga without them costs no query for them."""
    out = saga_summary(saga)
    has_steps = not read_just_now or saga.next_sequence > 1
    has_nodes = not read_just_now or saga.next_position > 1
    out["steps"] = [step_to_dict(s) for s in saga.steps.order_by("sequence")] if has_steps else []
    nodes = list(saga.nodes.prefetch_related("approvals", "dependency_links").order_by("position")) if has_nodes else []
    checkpoints = list(saga.checkpoints.order_by("created_at"))
    if nodes or checkpoints:
        contexts = waiting_contexts(nodes)
        shown_nodes = [node_to_dict(n, contexts=contexts) for n in nodes]
        shown_checkpoints = [checkpoint_to_dict(c) for c in checkpoints]
        out["workflow"] = {"version": WORKFLOW_VERSION, "nodes": shown_nodes, "checkpoints": shown_checkpoints}
        out["metadata"] = {
            **saga.metadata,
            ENGINE_KEY: _engine_state(shown_nodes, shown_checkpoints, _node_snapshots(nodes, out["steps"])),
        }
    return out


# semantic-saga-mcp keeps its workflow in the saga's metadata under `_engine` ({version, nodes by id, checkpoints}),
# and its clients read it there. Ours lives in tables: an answer derives `_engine` from them when it is read
# (nothing is stored under that key), so it says what `workflow` says, with each node's pinned contract.
ENGINE_KEY = "_engine"


def _engine_state(
    nodes: list[dict[str, Any]], checkpoints: list[dict[str, Any]], snapshots: Mapping[str, Any]
) -> dict[str, Any]:
    return {
        "version": WORKFLOW_VERSION,
        "nodes": {node["id"]: {**node, "action_definition": snapshots.get(node["id"])} for node in nodes},
        "checkpoints": checkpoints,
    }


def _node_snapshots(nodes: list[Node], steps: list[dict[str, Any]]) -> dict[str, Any]:
    """Each node's pinned contract as shown: its step's snapshot once it ran, else the registry's row of the
    version and hash it pinned (one query for all of them; None where none matches, e.g. a proxied call)."""
    by_step = {step["id"]: step.get("action_definition") for step in steps}
    found: dict[str, Any] = {}
    waiting: list[Node] = []
    for node in nodes:
        if node.step_id is not None and str(node.step_id) in by_step:
            found[str(node.id)] = by_step[str(node.step_id)]
        else:
            waiting.append(node)
    if waiting:
        rows = ActionDefinition.objects.filter(
            action_id__in={node.action for node in waiting},
            definition_hash__in={node.action_definition_hash for node in waiting},
        ).values_list("action_id", "version", "definition_hash", "definition")
        pinned = {(action, version, digest): definition for action, version, digest, definition in rows}
        for node in waiting:
            definition = pinned.get((node.action, node.action_version, node.action_definition_hash))
            found[str(node.id)] = shown_definition(definition)
    return found
