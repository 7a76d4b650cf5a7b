"""Proxied calls: every tools/call an agent makes through the MCP proxy is a journaled step of its session's saga.

A client session is a saga of kind PROXY_SESSION (`proxy_session_open`), its `metadata.proxy` saying what it is. A
call is begun (`proxy_call_begin`) in one transaction that decides, in this order, and journals what it decided:

    kill switch engaged          -> step REFUSED                      (nothing sent)
    preview session, not a read  -> step DRY, with the would-be gate  (nothing sent)
    gate block or hide           -> step REFUSED
    tenant policy denies         -> step REFUSED
    gate confirm, or policy requires approval -> a held node (sagas.coordinator.proxy.held_calls)
    otherwise                    -> step EXECUTING under a lease, before anything is sent (write-ahead)

A protocol read (resources/read or prompts/get, `call.method`; sagas.protocols.proxy.reads) takes the same path
as a call of class read with gate allow, so it is never dry and never held: one policy would hold is refused
(READ_NEEDS_APPROVAL). Its failures are READ_ERROR (the downstream's error) and, as a read changes nothing, an
answer lost is not an uncertain outcome.

The proxy then forwards the call on its event loop with the step id as the idempotency key, while this process keeps
the lease alive, and records the outcome (`proxy_call_finish`): COMPLETED with the downstream result (secrets
scrubbed by the proxy, truncated past maxResultBytes with the original size kept) and the duration; FAILED for an
isError answer, a call that could not be sent, or one whose answer was lost (then `uncertain_outcome`). No failure
mode is applied: the agent is answered and the session goes on. A proxy that dies mid-call stops renewing the lease
and the recovery sweep fails the step as uncertain and pauses the session (failure_mode pause in the snapshot).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from audit.canonical import sha256_hex
from audit.models import EventType as E
from governance.identity.principal import Principal
from governance.identity.rbac import EXECUTE, authorize
from governance.policy.facts import Decision
from registry.capture_outcomes import OUTCOME_KEY, POST_STATE
from registry.tool_answers import payload_of
from sagas.coordinator import policy as _policy
from sagas.coordinator._actions import Pinned
from sagas.coordinator._event_facts import transition_facts
from sagas.coordinator._leases import RELEASED, LeaseRef, keep_alive, lease_deadline, let_go, worker_id
from sagas.coordinator._proxied_journal import KEPT_LEASES, Begun, refuse
from sagas.coordinator._steps import journal_step
from sagas.coordinator._tx import Tx, locked_saga
from sagas.coordinator.execution.attempts import new_step
from sagas.coordinator.previews import dry_execute
from sagas.coordinator.proxy.contract import SESSION_KEY, snapshot
from sagas.coordinator.proxy.held_calls import hold
from sagas.coordinator.sagas import begin
from sagas.coordinator.sql import statements
from sagas.errors import InvalidInput, InvalidTransition, NotFound
from sagas.models import Node, Saga, Step
from sagas.proxied_facts import BehindRead, CallFacts, CallOutcome, FinishedCall, SessionFacts
from sagas.selectors.scope import parse_uuid
from sagas.states import NodeStatus, SagaKind, SagaStatus, StepStatus


def proxy_session_open(*, actor: Principal, session: SessionFacts, preview: bool = False) -> Saga:
    """Begin the saga of one client session, of kind PROXY_SESSION (only here): `metadata.proxy` holds `session`
    (client name and version, protocol version, era, config path, connection key), `preview` makes it a dry-run
    session. Audit SAGA_STARTED."""
    authorize(actor, EXECUTE, "begin")
    metadata = {SESSION_KEY: session.model_dump(mode="json")}
    return begin(actor=actor, metadata=metadata, preview=preview, kind=SagaKind.PROXY_SESSION)


def proxy_call_begin(
    *,
    actor: Principal,
    saga_id: object,
    call: CallFacts,
    arguments: dict[str, Any],
    step_id: uuid.UUID | None = None,
    finished: Sequence[FinishedCall] = (),
) -> Begun:
    """Journal one proxied call and decide what happens to it (the table in the module docstring).

    `call` holds the downstream tool's facts the proxy computed (sagas.proxied_facts). A call held on an open
    request (`held_as="request"`) is leased to this process, which keeps the lease alive while it waits: if the
    process dies, the sweep withdraws the call (held_calls.held_call_abandon).
    Errors: PROXY_SESSION_NOT_ACTIVE (the session was committed, rolled back or waits for an operator),
    PROXIED_CONTRACT_INVALID, INVALID_INPUT, HELD_CALLS_LIMIT (held_calls). `step_id`, when the proxy chose it
    before sending (a read journaled behind its answer, which carried it as idempotency key), names the new step.
    `finished`: outcomes of the session's earlier forwarded calls, recorded first in the same transaction exactly
    as `proxy_call_finish` records each (one commit for both, where the proxy's next call follows at once); an
    error writes none of them, and the caller records them on their own.
    """
    authorize(actor, EXECUTE, "execute")
    pinned = snapshot(call)
    handles = [KEPT_LEASES.pop(_uuid(done.step_id), None) for done in finished]
    saga_pk = parse_uuid(saga_id)
    # Their steps are read with the lock, in its round trip on PostgreSQL.
    steps = [statements.step_of_saga_query(_uuid(done.step_id), saga_pk) for done in finished] if saga_pk else []
    try:
        with locked_saga(saga_id, actor, also=steps, session=True) as tx:
            for done, found in zip(finished, tx.also_rows, strict=True):
                finish_in(tx, statements.step_from(found), done.step_id, done.fence, done.outcome)
            _require_live_session(tx)
            begun = _decide(tx, pinned, call, arguments, {"id": step_id} if step_id else {})
    except BaseException:
        _keep_again(finished, handles)  # nothing was written: their leases stay kept until they are recorded
        raise
    _let_go(handles)
    if begun.outcome == "forward":
        KEPT_LEASES[uuid.UUID(begun.step_id)] = keep_alive(LeaseRef(Step, uuid.UUID(begun.step_id), begun.fence))
    elif begun.outcome == "held" and call.held_as == "request":
        KEPT_LEASES[uuid.UUID(begun.node_id)] = keep_alive(LeaseRef(Node, uuid.UUID(begun.node_id), 0))
    return begun


def proxy_reads_record(*, actor: Principal, saga_id: object, reads: list[BehindRead]) -> list[Begun]:
    """Journal reads answered before their steps were written (sagas.protocols.proxy.behind), in one transaction:
    each is decided as `proxy_call_begin` decides it under its own step id and, when forwarded, written as
    `proxy_call_finish` leaves it; the same rows and audit events as one begin and one finish per read, in order.
    A forwarded read's row is written once, in its final state (the steps of the batch in one statement): the
    write-behind thread shares the proxy's interpreter with the calls being answered, so its cost shows in theirs.

    Errors: PROXY_SESSION_NOT_ACTIVE (then none is written), as proxy_call_begin."""
    authorize(actor, EXECUTE, "execute")
    begun: list[Begun] = []
    with locked_saga(saga_id, actor, session=True, only_answered=True) as tx:  # the calls out are recorded later
        _require_live_session(tx)
        answered: list[Step] = []
        for read in reads:
            named = {"id": _uuid(read.step_id)}
            behind = Answered(read.outcome, answered)
            begun.append(_decide(tx, snapshot(read.call), read.call, read.arguments, named, behind))
        statements.insert_steps(answered)
    return begun


@dataclass(frozen=True)
class Answered:
    """A call already answered whose step is written now (a read in proxy_reads_record, a call sent on an intent:
    sagas.coordinator.proxy.intents): its outcome, the batch's rows to insert together, and who made the call when
    it is not the transaction's actor."""

    outcome: CallOutcome
    rows: list[Step]
    by: tuple[str, str] | None = None


def _decide(
    tx: Tx,
    pinned: Pinned,
    call: CallFacts,
    arguments: dict[str, Any],
    named: dict[str, Any],
    answered: Answered | None = None,
) -> Begun:
    told, audit = call.gate_facts(), call.audit_facts()
    # A read journaled behind its answer (`named`: its step id chosen before sending) was checked against the kill
    # switch before it was sent; a switch engaged since stops the calls after it, and this step says what happened.
    if not named and (stop := _policy.kill_switch_stop(tx, f"calling {call.tool} on {call.server}")):
        code, reason = "KILL_SWITCH_ENGAGED", stop.message
        return refuse(tx, pinned, arguments, code=code, reason=reason, facts=told, audit=audit, **named)
    if tx.saga.preview and call.effect_class != "read":
        return _dry(tx, pinned, arguments, call)
    if call.gate in ("block", "hide"):
        reason = f"the proxy's gate for it is {call.gate} ({call.gate_reason})"
        return refuse(tx, pinned, arguments, code="GATE_BLOCKED", reason=reason, facts=told, audit=audit)
    decision = _policy.decide(tx, "execute", pinned, as_evaluated=True)
    if decision.effect == "deny":
        error = _policy.refusal(decision, f"calling {call.tool} on {call.server}")
        facts = {**told, "policy": {"effect": decision.effect, "rules": list(decision.matched_rules)}}
        return refuse(tx, pinned, arguments, code=error.code, reason=error.message, facts=facts, audit=audit)
    if call.method and decision.effect == "require_approval":
        return _unheld_read(tx, pinned, arguments, call, decision)
    if call.gate == "confirm" or decision.effect == "require_approval":
        source = "proxy:" + (call.gate_source if call.gate == "confirm" else "policy")
        return hold(tx, pinned, arguments, call, requested_by=source)
    if answered is not None:
        step = write_answered(tx, pinned, arguments, named, answered, audit)
        return Begun("forward", str(tx.saga.id), step_id=str(step.id), fence=1, facts=told)
    lease = {"lease_owner": worker_id(), "lease_expires_at": lease_deadline(), **named}
    step = new_step(tx, pinned, arguments, None, 1, **lease)
    tx.record(E.STEP_STARTED, step=step, status=StepStatus.EXECUTING, data={"attempt": 1, **audit})
    return Begun("forward", str(tx.saga.id), step_id=str(step.id), fence=1, facts=told)


def write_answered(
    tx: Tx, pinned: Pinned, arguments: dict[str, Any], named: dict[str, Any], answered: Answered, audit: dict[str, Any]
) -> Step:
    """An answered call's step as a begin then a finish leave it (row and events), its row queued for one insert."""
    step = journal_step(tx, pinned, arguments, None, insert=False, status=StepStatus.EXECUTING, attempts=1, **named)
    step.fence_token = 1
    by = answered.by
    tx.record(E.STEP_STARTED, step=step, status=StepStatus.EXECUTING, data={"attempt": 1, **audit}, by=by)
    to, event, fields = _outcome_fields(step, answered.outcome)
    step.status = to
    for name, value in fields.items():
        setattr(step, name, value)
    tx.record(event, step=step, status=to, data=transition_facts(step, event), by=by)
    answered.rows.append(step)
    return step


def _unheld_read(tx: Tx, pinned: Pinned, arguments: dict[str, Any], call: CallFacts, decision: Decision) -> Begun:
    """A protocol read (resources/read, prompts/get) is never held: when policy would hold it, it is refused."""
    reason = (
        f"tenant policy requires an operator's approval for {call.tool} on {call.server} ({decision.reason}), "
        f"and a {call.method} cannot wait for one; an operator may change the policy rule"
    )
    facts = {**call.gate_facts(), "policy": {"effect": decision.effect, "rules": list(decision.matched_rules)}}
    return refuse(
        tx, pinned, arguments, code="READ_NEEDS_APPROVAL", reason=reason, facts=facts, audit=call.audit_facts()
    )


def proxy_call_finish(*, actor: Principal, saga_id: object, step_id: object, fence: int, outcome: CallOutcome) -> Step:
    """Record what the forwarded call did, if this process still owns it (else STALE_WRITE_REFUSED, unchanged).

    Effects: step (and the held call's node) COMPLETED or FAILED; audit STEP_COMPLETED or STEP_FAILED.
    """
    authorize(actor, EXECUTE, "execute")
    handle = KEPT_LEASES.pop(_uuid(step_id), None)
    try:
        with locked_saga(saga_id, actor, session=True, only_answered=True) as tx:  # decides nothing for others
            step = finish_in(tx, statements.step_of_saga(_uuid(step_id), tx.saga.pk), step_id, fence, outcome)
    finally:
        _let_go([handle])
    return step


def finish_in(tx: Tx, step: Step | None, step_id: object, fence: int, outcome: CallOutcome) -> Step:
    """Record a forwarded call's `outcome` on its `step` (read by the caller) if the fence is still `fence`."""
    if step is not None and step.node_id is not None:
        step.node = statements.node_by_id(step.node_id)
    if step is None:
        raise NotFound("STEP_NOT_FOUND", f"Step {step_id} is not a step of saga {tx.saga.id}.")
    if _still_ours(tx, step, fence):
        _record(tx, step, outcome)
    return step


def _keep_again(finished: Sequence[FinishedCall], handles: list[int | None]) -> None:
    for done, handle in zip(finished, handles, strict=True):
        if handle is not None:
            KEPT_LEASES[_uuid(done.step_id)] = handle


def _let_go(handles: list[int | None]) -> None:
    for handle in handles:
        if handle is not None:
            let_go(handle)


def _dry(tx: Tx, pinned: Pinned, arguments: dict[str, Any], call: CallFacts) -> Begun:
    """A preview session's mutation: journaled DRY with what policy and the gate would have done."""
    step = dry_execute(tx, pinned, arguments)
    gate = call.gate
    result = dict(step.result or {})
    # In the order a live call is decided (_decide): the gate's block or hide before policy, then a policy deny,
    # then confirm (a policy's own approval requirement is already in the verdict).
    if gate in ("block", "hide"):
        result.update(outside_preview="would be blocked by the gate", why=call.gate_reason)
    elif gate == "confirm" and result.get("outside_preview") == "would run":
        result.update(outside_preview="would wait for approval", why=call.gate_reason)
    result["proxy"] = {"class": call.effect_class, "class_source": call.class_source, "would_gate": gate}
    tx.update(step, result=result)
    return Begun(
        "dry", str(tx.saga.id), step_id=str(step.id), reason=str(result["outside_preview"]), facts=call.gate_facts()
    )


def _record(tx: Tx, step: Step, outcome: CallOutcome) -> None:
    to, event, fields = _outcome_fields(step, outcome)
    tx.transition(step, to, event=event, **fields)
    node = step.node
    if node is None:
        return
    if to == StepStatus.COMPLETED:
        tx.transition(node, NodeStatus.COMPLETED, event=E.NODE_COMPLETED, result=None, **RELEASED)
    else:
        failed = {"error": fields["error"], "uncertain_outcome": fields["uncertain_outcome"], **RELEASED}
        tx.transition(node, NodeStatus.FAILED, event=E.NODE_FAILED, **failed)


def _outcome_fields(step: Step, outcome: CallOutcome) -> tuple[str, str, dict[str, Any]]:
    """What a forwarded call's outcome makes of its step: the status, the event, and the columns written (its
    lease let go)."""
    envelope, size, truncated = _envelope(step, outcome)
    kind = outcome.kind
    if kind == "answered" and not outcome.is_error:
        return StepStatus.COMPLETED, E.STEP_COMPLETED, {"result": envelope, "error": None, **RELEASED}
    # A read changed nothing, so an answer lost (or too large to read) is not an uncertain outcome.
    proxy = step.action_definition.get("proxy", {})
    protocol_read = bool(proxy.get("method"))
    uncertain = kind in ("lost", "too_large") and not protocol_read and proxy.get("class") != "read"
    answered = "READ_ERROR" if protocol_read else "TOOL_ERROR"
    codes = {
        "answered": answered,
        "not_sent": "DOWNSTREAM_UNAVAILABLE",
        "capture_failed": "CAPTURE_FAILED",
        "too_large": "RESULT_TOO_LARGE",
    }
    code = codes.get(kind, "ANSWER_LOST")
    error = {
        "code": code,
        "message": outcome.reason or "the downstream tool answered with isError",
        "uncertain": uncertain,
        "sent": kind not in ("not_sent", "capture_failed"),
        "duration_ms": outcome.duration_ms,
        "size_bytes": size,
        "truncated": truncated,
    }
    fields = {
        "error": error,
        "result": envelope if kind in ("answered", "too_large") else None,
        "uncertain_outcome": uncertain,
        **RELEASED,
    }
    return StepStatus.FAILED, E.STEP_FAILED, fields


def _envelope(step: Step, outcome: CallOutcome) -> tuple[dict[str, Any], int, bool]:
    """The stored result: the mcp action's envelope shape, so compensation templates read `${result.x}` alike
    (`result` is the answer's payload by registry.tool_answers' rule, `content` what the agent got), plus what the
    proxy measured. Past maxResultBytes only a prefix of the answer's text is kept."""
    answer = outcome.result if isinstance(outcome.result, dict) else {}
    protocol_read = bool(step.action_definition.get("proxy", {}).get("method"))
    if protocol_read:  # a resources/read or prompts/get answer is kept whole (contents, messages)
        kept: dict[str, Any] = {"result": answer, "result_from": "none", "content": []}
    else:
        payload = payload_of(answer)
        kept = {"result": payload.value, "result_from": payload.source, "content": answer.get("content", [])}
    text = json.dumps(answer, ensure_ascii=False, sort_keys=True)
    size = len(text.encode("utf-8")) if outcome.size_bytes is None else outcome.size_bytes
    limit = outcome.max_result_bytes
    truncated = size > limit
    if truncated:
        prefix = text.encode("utf-8")[:limit].decode("utf-8", errors="ignore")
        kept = {"result": {"truncated": True, "prefix": prefix}, "result_from": "none", "content": []}
    envelope = {
        "tool": str(step.action_definition.get("forward", {}).get("tool", "")),
        **kept,
        "is_error": outcome.is_error,
        "size_bytes": size,
        "truncated": truncated,
        "duration_ms": outcome.duration_ms,
    }
    if outcome.captured:
        # The capture read's payload, as an mcp action keeps it: the inverse reads it as ${pre_state.x}.
        envelope.update(pre_state=outcome.pre_state, pre_state_sha256=sha256_hex(outcome.pre_state))
    if outcome.capture_outcome != "found":
        envelope[OUTCOME_KEY] = outcome.capture_outcome  # the branch the undo takes
    if outcome.read_after:
        envelope[POST_STATE] = outcome.post_state  # what the undo's drift check expects to read then
    return envelope, size, truncated


def _still_ours(tx: Tx, step: Step, fence: int) -> bool:
    holder: Node | Step = step.node if step.node is not None else step
    if holder.fence_token == fence and step.status == StepStatus.EXECUTING:
        return True
    # The sweep fenced it off (the lease lapsed): the late outcome is evidence, never state.
    tx.record(E.STALE_WRITE_REFUSED, step=step, status=step.status, data={"attempt": 1, "fence_token": fence})
    return False


def _require_live_session(tx: Tx) -> None:
    if not tx.saga.is_proxy_session:
        raise InvalidInput(message=f"Saga {tx.saga.id} is not a proxy session; proxied calls need one.")
    if tx.saga.status != SagaStatus.ACTIVE:
        raise InvalidTransition(
            "PROXY_SESSION_NOT_ACTIVE",
            f"This proxy session (saga {tx.saga.id}) is {tx.saga.status}, so no call can be made in it; nothing was "
            "sent. It was committed, rolled back or paused; start a new session (reconnect) to go on.",
        )


def _uuid(value: object) -> uuid.UUID:
    try:
        return value if isinstance(value, uuid.UUID) else uuid.UUID(str(value))
    except ValueError:
        raise NotFound("STEP_NOT_FOUND", f"{value!r} is not a step id.") from None
