"""Approval gates as A2A INPUT_REQUIRED: what a `run` task that stops at a gate says, and what it keeps to go on.

A `run` command whose saga stops because a node waits for an approval ends its turn as TASK_STATE_INPUT_REQUIRED
(not COMPLETED): the run's result is the task's artifact so far, and the status message names the node (key and
id), its action, who may approve it (an operator in the console or through REST, or an authorized peer) and the
exact `approve` command a peer sends with the task's taskId. The task's metadata keeps the gate (public) and the
identity that asked for the run (private: stripped before any peer reads the task) so that the run can go on after
an operator's approval, when no peer is there to send anything (sagas.protocols.a2a.continuation).
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from a2a.helpers import new_data_part, new_text_part
from a2a.types.a2a_pb2 import Message, Role, Task
from google.protobuf.json_format import MessageToDict

from governance.identity.principal import Principal

JSON_MEDIA_TYPE = "application/json"
# Task metadata keys. GATE_KEY is public (peers read which gate the task waits on); REQUESTER_KEY is not.
GATE_KEY = "semanticSagaGate"
REQUESTER_KEY = "semanticSagaRequester"
WAITING_APPROVAL = "WAITING_APPROVAL"


def gate_of(result: dict[str, Any]) -> dict[str, Any] | None:
    """The gate a run result stopped at, or None when the run did not stop for an approval."""
    run = result.get("run") or {}
    if run.get("stopped_because") != "waiting_approval":
        return None
    nodes = (result.get("workflow") or {}).get("nodes") or []
    waiting = [node for node in nodes if node.get("status") == WAITING_APPROVAL]
    if not waiting:
        return None
    first = waiting[0]
    return {
        "saga_id": str(result["id"]),
        "node_id": str(first["id"]),
        "key": first["key"],
        "action": first["action"],
        "waiting": [{"node_id": str(node["id"]), "key": node["key"]} for node in waiting],
    }


def approve_command(gate: dict[str, Any]) -> dict[str, Any]:
    return {"operation": "approve", "saga_id": gate["saga_id"], "node_id": gate["node_id"], "reason": "<why>"}


def gate_text(gate: dict[str, Any], task_id: str) -> str:
    others = [w["key"] for w in gate["waiting"] if w["node_id"] != gate["node_id"]]
    also = f" Also waiting: {', '.join(others)}." if others else ""
    return (
        f"Waiting for approval: saga {gate['saga_id']} stopped at node {gate['key']} (id {gate['node_id']}), action "
        f"{gate['action']}.{also} An operator approves it in the console or through the REST API (POST "
        f"/api/v1/sagas/{gate['saga_id']}/nodes/{gate['node_id']}/approve/), or an authorized peer (a role that may "
        f"execute) sends this command as a message with taskId {task_id}: {json.dumps(approve_command(gate))} "
        '(add "approved": false to reject). Either way this task then continues the run; GetTask or '
        "SubscribeToTask follows it."
    )


def gate_message(gate: dict[str, Any], task_id: str, context_id: str, prefix: str = "") -> Message:
    """The INPUT_REQUIRED status message: the instructions as text, and the gate and command as data."""
    data = {"awaiting_approval": gate, "approve": approve_command(gate)}
    return Message(
        message_id=str(uuid.uuid4()),
        role=Role.ROLE_AGENT,
        task_id=task_id,
        context_id=context_id,
        parts=[new_text_part(prefix + gate_text(gate, task_id)), new_data_part(data, media_type=JSON_MEDIA_TYPE)],
    )


def gate_metadata(gate: dict[str, Any], requester: Principal) -> dict[str, Any]:
    return {GATE_KEY: gate, REQUESTER_KEY: principal_record(requester)}


def task_gate(task: Task) -> dict[str, Any] | None:
    if GATE_KEY not in task.metadata.fields:
        return None
    gate: dict[str, Any] = MessageToDict(task.metadata.fields[GATE_KEY].struct_value)
    return gate


def public(task: Task) -> Task:
    """The task as peers see it: without the requester's identity."""
    if REQUESTER_KEY in task.metadata.fields:
        del task.metadata.fields[REQUESTER_KEY]
    return task


# --- the requester's identity, kept to go on with the run after an operator's approval -----------------------------


def principal_record(principal: Principal) -> dict[str, Any]:
    return {
        "principal_id": principal.principal_id,
        "tenant_id": principal.tenant_id,
        "principal_type": principal.principal_type,
        "roles": sorted(principal.roles),
        "scopes": sorted(principal.scopes),
        "protocol": principal.protocol,
    }


def requester_of(task: Task) -> Principal | None:
    if REQUESTER_KEY not in task.metadata.fields:
        return None
    record = MessageToDict(task.metadata.fields[REQUESTER_KEY].struct_value)
    return Principal(
        principal_id=str(record["principal_id"]),
        tenant_id=str(record["tenant_id"]),
        principal_type=str(record.get("principal_type", "user")),
        roles=frozenset(record.get("roles") or ()),
        scopes=frozenset(record.get("scopes") or ()),
        authenticated=True,
        protocol=str(record.get("protocol", "a2a")),
    )
