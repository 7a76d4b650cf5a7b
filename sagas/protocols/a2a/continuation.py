"""Continuing an INPUT_REQUIRED task once its gate is decided, from durable state only.

Two ways in, one way on:
- a peer sends the `approve` command with the task's taskId (approve_by_message): the approval goes through the
  operation table as that peer, then the task is brought up to date;
- an operator approves or rejects in the console or through REST: the next read of the task (GetTask, ListTasks,
  SubscribeToTask, on any replica) brings it up to date (refresh).

Bringing up to date reads the saga through the operation table (`get`): a node still waiting leaves the task as it
is; a rejected node makes it REJECTED with the decision's reason; otherwise the task is claimed (INPUT_REQUIRED ->
WORKING, a conditional UPDATE, so exactly one reader wins across replicas) and the claimant goes on with the run
(`run` with the task's original arguments, as the approving peer or else the peer that asked for the run), settling
the task as COMPLETED with the result, INPUT_REQUIRED at the next gate, REJECTED or FAILED. These units write only
A2A task rows; saga state is the coordinator's, reached through the operation table.

A process that dies while it continues a run leaves that task WORKING with nobody settling it. A continuation
ends within its run's wait_seconds, so a continued task still WORKING well past that (STALE_AFTER_SECONDS more)
was left by a dead process: the next read takes it over (take_over_stale, the same compare-and-set) and runs again,
which is safe (a run re-budgets and nudges; the coordinator's fencing keeps every node to one attempt at a time).
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import uuid
from dataclasses import dataclass
from typing import Any

from a2a.helpers import new_data_part, new_text_part
from a2a.types.a2a_pb2 import Artifact, Message, Part, Role, Task, TaskState, TaskStatus
from django.utils import timezone
from google.protobuf.json_format import MessageToDict
from google.protobuf.timestamp_pb2 import Timestamp

from governance.errors import ServiceError
from governance.identity.principal import Principal
from sagas.models import A2ATask
from sagas.operations.arguments import Args
from sagas.operations.invoke import invoke
from sagas.operations.table import A2A_OPERATIONS
from sagas.protocols.a2a.commands import JSON_MEDIA_TYPE, RESULT_ARTIFACT, parse_command, refusal_parts, run_command
from sagas.protocols.a2a.gates import GATE_KEY, WAITING_APPROVAL, gate_message, gate_of, requester_of, task_gate
from sagas.protocols.a2a.task_store import bound_history, task_from_json

logger = logging.getLogger("sagas.protocols.a2a.commands")

INPUT_REQUIRED = TaskState.TASK_STATE_INPUT_REQUIRED
WORKING = TaskState.TASK_STATE_WORKING
# Beyond its run's wait_seconds, how long a continued task may stay WORKING before a reader takes it over.
STALE_AFTER_SECONDS = 60.0


@dataclass(frozen=True)
class Continuation:
    """A claimed task (now WORKING) whose run must go on."""

    tenant_id: str
    task_id: str
    principal: Principal
    args: Args


# --- ORM units (synchronous, run off the loop through run_orm) --------------------------------------------------------


def refresh(
    tenant_id: str, task_id: str, reader: Principal, approver: Principal | None = None, said: Message | None = None
) -> Continuation | None:
    """Brings an INPUT_REQUIRED task up to date with its saga; a Continuation when this caller claimed the run."""
    task = _load(tenant_id, task_id, INPUT_REQUIRED)
    gate = None if task is None else task_gate(task)
    if task is None or gate is None:
        return None
    try:
        saga = invoke(A2A_OPERATIONS["get"], reader, _saga_ref(gate["saga_id"]))
    except ServiceError:  # the reader may not see the saga (it was deleted, or the reader lost access): wait on
        return None
    node = next((n for n in saga.get("workflow", {}).get("nodes", []) if str(n["id"]) == gate["node_id"]), None)
    status = None if node is None else node["status"]
    if status == WAITING_APPROVAL:
        return None
    if status == "REJECTED" and node is not None:
        _set_status(task, TaskState.TASK_STATE_REJECTED, _rejected_parts(gate, node, saga), said)
        _write(tenant_id, task, INPUT_REQUIRED)
        return None
    principal = approver or requester_of(task)
    if principal is None:
        return None
    args = parse_command(task.history[0]).args  # the task's own run command, with the peer's limits
    text = f"Node {gate['key']} (id {gate['node_id']}) is approved: the run goes on."
    _set_status(task, WORKING, [new_text_part(text)], said)
    if not _write(tenant_id, task, INPUT_REQUIRED):
        return None  # another reader (or replica) claimed it first and goes on with it
    return Continuation(tenant_id, task_id, principal, args)


def approve_by_message(tenant_id: str, task_id: str, peer: Principal, args: Args, said: Message) -> Continuation | None:
    """A peer's `approve` for the task's gate: approve as that peer, then bring the task up to date."""
    try:
        invoke(A2A_OPERATIONS["approve"], peer, args)
    except ServiceError as refusal:
        # The gate still waits for someone allowed to decide: the task stays INPUT_REQUIRED and says why.
        task = _load(tenant_id, task_id, INPUT_REQUIRED)
        gate = None if task is None else task_gate(task)
        if task is not None and gate is not None:
            prefix = f"Your approve command was refused ({refusal.code}: {refusal.message}). Still waiting. "
            message = gate_message(gate, task.id, task.context_id, prefix=prefix)
            _set_status(task, INPUT_REQUIRED, list(message.parts), said)
            _write(tenant_id, task, INPUT_REQUIRED)
        return None
    return refresh(tenant_id, task_id, peer, approver=peer, said=said)


def take_over_stale(tenant_id: str, task_id: str) -> Continuation | None:
    """A continued task left WORKING by a process that died: claimed by this reader to run again, or None."""
    row = A2ATask.objects.filter(pk=task_id, tenant_id=tenant_id, state=TaskState.Name(WORKING)).first()
    task = None if row is None else task_from_json(row.task)
    principal = None if task is None or task_gate(task) is None else requester_of(task)
    if row is None or task is None or principal is None:
        return None  # not a continuation (a first turn is the SDK executor's), or nobody to run it as
    args = parse_command(task.history[0]).args
    patience = float(getattr(args, "wait_seconds", 60)) + STALE_AFTER_SECONDS
    if (timezone.now() - row.updated_at).total_seconds() < patience:
        return None
    _set_status(task, WORKING, [new_text_part("The process continuing this run stopped; the run goes on here.")])
    taken = A2ATask.objects.filter(pk=task_id, tenant_id=tenant_id, state=row.state, updated_at=row.updated_at).update(
        task=MessageToDict(task), updated_at=task.status.timestamp.ToDatetime(tzinfo=dt.UTC)
    )
    return Continuation(tenant_id, task_id, principal, args) if taken else None


def continue_run(job: Continuation) -> None:
    """Goes on with a claimed task's run and settles it (it is WORKING and this job's alone)."""
    try:
        result = run_command(A2A_OPERATIONS["run"], job.principal, job.args)
    except ServiceError as refusal:
        _settle(job, TaskState.TASK_STATE_REJECTED, refusal_parts(refusal))
        return
    except Exception as exc:  # a bug or an outage: say so without leaking internals
        logger.exception("A2A run continuation failed unexpectedly task=%s", job.task_id)
        text = (
            f"run failed unexpectedly ({type(exc).__name__}) after the approval. Read the saga (get) before "
            "running it again: the run may or may not have changed it."
        )
        _settle(job, TaskState.TASK_STATE_FAILED, [new_text_part(text)])
        return
    _settle(job, None, [], result)


def _settle(job: Continuation, state: Any, parts: list[Part], result: dict[str, Any] | None = None) -> None:
    task = _load(job.tenant_id, job.task_id, WORKING)
    if task is None:
        return
    if result is not None:
        _replace_result(task, result)
        gate = gate_of(result)
        if gate is None:
            state = TaskState.TASK_STATE_COMPLETED
        else:
            state, parts = INPUT_REQUIRED, list(gate_message(gate, task.id, task.context_id).parts)
            task.metadata.update({GATE_KEY: gate})
    _set_status(task, state, parts)
    _write(job.tenant_id, task, WORKING)


# --- helpers ----------------------------------------------------------------------------------------------------------


def _saga_ref(saga_id: str) -> Args:
    ref: Args = A2A_OPERATIONS["get"].arguments.model_validate({"saga_id": saga_id})
    return ref


def _load(tenant_id: str, task_id: str, state: int) -> Task | None:
    row = A2ATask.objects.filter(pk=task_id, tenant_id=tenant_id, state=TaskState.Name(state)).only("task").first()
    return None if row is None else task_from_json(row.task)


def _write(tenant_id: str, task: Task, from_state: int) -> bool:
    """Saves the task if it is still in from_state: the compare-and-set every writer here goes through."""
    updated = A2ATask.objects.filter(pk=task.id, tenant_id=tenant_id, state=TaskState.Name(from_state)).update(
        state=TaskState.Name(task.status.state),
        task=MessageToDict(task),
        updated_at=task.status.timestamp.ToDatetime(tzinfo=dt.UTC),
    )
    return bool(updated)


def _set_status(task: Task, state: Any, parts: list[Part], said: Message | None = None) -> None:
    """A new status; the previous status message and the peer's message (if any) join the history, in order, the
    oldest dropping out past SAGA_A2A_MAX_TASK_HISTORY."""
    if task.status.HasField("message"):
        task.history.append(task.status.message)
    if said is not None:
        task.history.append(said)
    bound_history(task)
    stamp = Timestamp()
    stamp.FromDatetime(timezone.now())
    status = TaskStatus(state=state, timestamp=stamp)
    if parts:
        message = Message(message_id=str(uuid.uuid4()), role=Role.ROLE_AGENT, task_id=task.id, parts=parts)
        message.context_id = task.context_id
        status.message.CopyFrom(message)
    task.status.CopyFrom(status)


def _replace_result(task: Task, result: dict[str, Any]) -> None:
    """One result artifact, the run's latest (same artifact id: a stream sends it as a replacement)."""
    artifact_id = task.artifacts[0].artifact_id if task.artifacts else str(uuid.uuid4())
    artifact = Artifact(
        artifact_id=artifact_id, name=RESULT_ARTIFACT, parts=[new_data_part(result, media_type=JSON_MEDIA_TYPE)]
    )
    del task.artifacts[:]
    task.artifacts.append(artifact)


def _rejected_parts(gate: dict[str, Any], node: dict[str, Any], saga: dict[str, Any]) -> list[Part]:
    approval = node.get("approval") or {}
    by = f" by {approval['principal_id']}" if approval.get("principal_id") else ""
    why = f": {approval['reason']}" if approval.get("reason") else ""
    text = (
        f"Node {gate['key']} (id {gate['node_id']}), action {gate['action']}, was rejected{by}{why}. The saga is "
        f"{saga.get('status')}: nothing more runs for this task. Read the saga (get), then retry the node or roll "
        "the saga back, each as a new message."
    )
    data = {"rejected": gate, "approval": approval, "saga_status": saga.get("status")}
    return [new_text_part(text), new_data_part(_json_ready(data), media_type=JSON_MEDIA_TYPE)]


def _json_ready(value: Any) -> Any:
    return json.loads(json.dumps(value, default=str))
