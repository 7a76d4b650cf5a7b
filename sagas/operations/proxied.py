"""The proxy's operations: surface-less entries of the operation table (no MCP tool of our own server, no A2A
operation, no REST route) that the MCP proxy (sagas.protocols.proxy.durable) invokes for every tools/call it
journals. They go through `invoke` like every other operation, so RBAC is checked once here and again in the
coordinator (sagas.coordinator.proxy.calls and held_calls); docs/proxy.md, "How a call is journaled".
"""

from __future__ import annotations

import dataclasses
import uuid
from typing import Any

from pydantic import Field

from governance.identity.principal import Principal
from governance.identity.rbac import Capability
from sagas import coordinator, selectors
from sagas.coordinator import Begun
from sagas.operations.arguments import Args
from sagas.operations.operation import READ, Hints, Operation
from sagas.operations.schemas import Output
from sagas.proxied_facts import BehindRead, CallFacts, CallOutcome, FinishedCall, SessionFacts

R, X = Capability.READ, Capability.EXECUTE
CALL = "The downstream tool's facts the proxy computed (sagas.proxied_facts.CallFacts): tool, definition, class, gate."


class ProxyArgs(Args):
    # What an agent sent a downstream tool and what that tool answered pass through the proxy unchanged: a long
    # string there is the agent's business, not a coordinator argument (docs/configuration.md, "Limits").
    bound_strings = False


class SessionOpenArgs(ProxyArgs):
    session: SessionFacts = Field(description="What metadata.proxy records: client, protocol version, config.")
    preview: bool = Field(default=False, description="true: a preview session (reads run, nothing else does).")


class CallArgs(ProxyArgs):
    saga_id: str = Field(description="The session's saga.")
    call: CallFacts = Field(description=CALL)
    arguments: dict[str, Any] = Field(description="The arguments the agent sent, exactly.")
    step_id: uuid.UUID | None = Field(
        default=None,
        description="The step's id when the proxy chose it before sending (a read journaled behind its answer "
        "carried it as its idempotency key); otherwise a new one.",
    )


class CallBeginArgs(CallArgs):
    finished: list[FinishedCall] = Field(
        default_factory=list,
        description="Outcomes of the session's earlier forwarded calls, recorded first in the same transaction "
        "(each as proxy_call_finish records it); when the begin fails, none of them is written.",
    )


class IntendArgs(ProxyArgs):
    saga_id: str = Field(description="The session's saga.")
    call: CallFacts = Field(description=CALL)
    arguments: dict[str, Any] = Field(description="The arguments the agent sent, exactly.")
    step_id: uuid.UUID = Field(description="The step the call will be, and its idempotency key.")


class CallsRecordArgs(ProxyArgs):
    saga_id: str = Field(description="The session's saga.")
    calls: list[FinishedCall] = Field(description="Outcomes of calls sent on an intent, in the order they were sent.")


class HeldCallArgs(CallArgs):
    node_id: str = Field(description="The held call (its node id).")


class WithdrawArgs(HeldCallArgs):
    why: str = Field(
        description="denied, timeout, disconnected, cancelled (its MCP task was) or redefined (the server no longer "
        "offers the approved definition)."
    )


class CallFinishArgs(ProxyArgs):
    saga_id: str = Field(description="The session's saga.")
    step_id: str = Field(description="The step the call was journaled as.")
    outcome: CallOutcome = Field(description="What the downstream did (sagas.proxied_facts.CallOutcome).")
    fence: int = Field(default=1, description="The fence token the call was begun under.")


class ReadsRecordArgs(ProxyArgs):
    saga_id: str = Field(description="The session's saga.")
    reads: list[BehindRead] = Field(
        description="Reads answered before their steps were written, in the order they were sent "
        "(sagas.proxied_facts.BehindRead)."
    )


class HeldCallRef(ProxyArgs):
    saga_id: str = Field(description="The session's saga.")
    node_id: str = Field(description="The held call (its node id).")


class ClientDecisionArgs(HeldCallRef):
    approved: bool = Field(description="What the person at the agent's client answered (MCP elicitation).")


BEGUN = Output(
    "ProxiedCallBegun",
    {
        "type": "object",
        "properties": {"outcome": {"enum": ["forward", "held", "dry", "refused"]}, "saga_id": {"type": "string"}},
        "required": ["outcome", "saga_id"],
    },
)
INTENDED = Output("ProxiedCallIntended", {"type": "object", "properties": {"intended": {"type": "boolean"}}})
RECORDED = Output("ProxiedCallsRecorded", {"type": "object", "properties": {"statuses": {"type": "array"}}})
READS = Output("ProxiedReadsRecorded", {"type": "object", "properties": {"begun": {"type": "array"}}})
SESSION = Output("ProxySession", {"type": "object", "properties": {"saga_id": {"type": "string"}}})
STEP = Output("ProxiedCallStep", {"type": "object", "properties": {"step_id": {"type": "string"}}})
DECISION = Output("HeldCallDecision", {"type": "object", "properties": {"decision": {"type": "string"}}})
NODE = Output("HeldCallNode", {"type": "object", "properties": {"node_id": {"type": "string"}}})


def _begun(begun: Begun) -> dict[str, Any]:
    """The answer's fields as they are (dataclasses.asdict would deep-copy the facts, made fresh for this call)."""
    return {field.name: getattr(begun, field.name) for field in dataclasses.fields(begun)}


def session_open(actor: Principal, a: SessionOpenArgs) -> dict[str, Any]:
    saga = coordinator.proxy_session_open(actor=actor, session=a.session, preview=a.preview)
    return {"saga_id": str(saga.id)}


def call_begin(actor: Principal, a: CallBeginArgs) -> dict[str, Any]:
    begun = coordinator.proxy_call_begin(
        actor=actor, saga_id=a.saga_id, call=a.call, arguments=a.arguments, step_id=a.step_id, finished=a.finished
    )
    return _begun(begun)


def call_release(actor: Principal, a: HeldCallArgs) -> dict[str, Any]:
    begun = coordinator.proxy_call_release(
        actor=actor, saga_id=a.saga_id, node_id=a.node_id, call=a.call, arguments=a.arguments
    )
    return _begun(begun)


def call_withdraw(actor: Principal, a: WithdrawArgs) -> dict[str, Any]:
    begun = coordinator.proxy_call_withdraw(
        actor=actor, saga_id=a.saga_id, node_id=a.node_id, why=a.why, call=a.call, arguments=a.arguments
    )
    return _begun(begun)


def call_finish(actor: Principal, a: CallFinishArgs) -> dict[str, Any]:
    step = coordinator.proxy_call_finish(
        actor=actor, saga_id=a.saga_id, step_id=a.step_id, fence=a.fence, outcome=a.outcome
    )
    return {"step_id": str(step.id), "status": step.status}


def call_intend(actor: Principal, a: IntendArgs) -> dict[str, Any]:
    intended = coordinator.proxy_call_intend(
        actor=actor, saga_id=a.saga_id, call=a.call, arguments=a.arguments, step_id=a.step_id
    )
    return {"intended": intended}


def calls_record(actor: Principal, a: CallsRecordArgs) -> dict[str, Any]:
    return {"statuses": coordinator.proxy_calls_record(actor=actor, saga_id=a.saga_id, calls=a.calls)}


def reads_record(actor: Principal, a: ReadsRecordArgs) -> dict[str, Any]:
    begun = coordinator.proxy_reads_record(actor=actor, saga_id=a.saga_id, reads=a.reads)
    return {"begun": [_begun(b) for b in begun]}


def client_decision(actor: Principal, a: ClientDecisionArgs) -> dict[str, Any]:
    node = coordinator.proxy_call_client_decide(actor=actor, saga_id=a.saga_id, node_id=a.node_id, approved=a.approved)
    return {"node_id": str(node.id), "status": node.status}


def call_decision(actor: Principal, a: HeldCallRef) -> dict[str, Any]:
    return selectors.held_call_decision(actor=actor, saga_id=a.saga_id, node_id=a.node_id)


def _surface_less(name: str, arguments: Any, handler: Any, capability: Capability, output: Output, title: str) -> Any:
    hints = READ if capability == R else Hints()
    return Operation(
        name, name, arguments, handler, capability, output, title, title, hints=hints, mcp=False, a2a=False
    )


PROXY_OPERATIONS: list[Operation[Any]] = [
    _surface_less("proxy_session_open", SessionOpenArgs, session_open, X, SESSION, "Open a proxy session"),
    _surface_less("proxy_call_begin", CallBeginArgs, call_begin, X, BEGUN, "Journal a proxied call and gate it"),
    _surface_less("proxy_call_release", HeldCallArgs, call_release, X, BEGUN, "Start an approved held call"),
    _surface_less("proxy_call_withdraw", WithdrawArgs, call_withdraw, X, BEGUN, "Journal a held call not sent"),
    _surface_less("proxy_call_finish", CallFinishArgs, call_finish, X, STEP, "Record a forwarded call's outcome"),
    _surface_less("proxy_call_intend", IntendArgs, call_intend, X, INTENDED, "Journal a call's intent, then send"),
    _surface_less("proxy_calls_record", CallsRecordArgs, calls_record, X, RECORDED, "Record calls sent on intents"),
    _surface_less("proxy_reads_record", ReadsRecordArgs, reads_record, X, READS, "Journal reads behind answers"),
    _surface_less("proxy_call_decision", HeldCallRef, call_decision, R, DECISION, "Read a held call's decision"),
    _surface_less(
        "proxy_call_client_decision", ClientDecisionArgs, client_decision, X, NODE, "Record the client's answer"
    ),
]
