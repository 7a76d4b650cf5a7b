"""A proxied call's intent: its write-ahead in one statement, its step written behind its answer.

`proxy_call_begin` journals a call in a transaction that locks the session, writes the step and its audit event and
commits before the call is sent: about a millisecond of work on the call's path (docs/benchmarks.md). When its
outcome is all but decided already (a plain call the gate allows while no tenant policy is configured: the
proxy's fast path, sagas.protocols.proxy.intended) the proxy journals an intent instead (`proxy_call_intend`): one
INSERT, its own commit, made only while the session is ACTIVE and no kill switch is engaged, with the call's facts,
arguments, step id and a lease this process keeps alive. The call is sent only once it is there. Its step is
written later, with its outcome (`proxy_calls_record`, on the proxy's write-behind thread).

An intent is never left for a reader to interpret. Every transaction on the session turns the intents it finds into
the EXECUTING steps they stand for, with their STEP_STARTED events, before it decides anything (`materialize`,
called by sagas.coordinator._tx): a commit, a rollback or an undo of the session sees every call sent, and the
outcome recorded afterwards finishes the step as `proxy_call_finish` would. On PostgreSQL such a transaction holds
the session's row FOR UPDATE from before it reads the intents, and the intent's INSERT takes the row FOR KEY SHARE:
it waits for that transaction's end and then finds the session as it left it (no longer ACTIVE, if it ended it),
while it never waits for the proxy's own transactions (FOR NO KEY UPDATE), which write its calls' steps behind
their answers; on SQLite writers are serialized anyway. A proxy that dies stops renewing the lease; the recovery
sweep turns the intent into its step, whose lapsed lease it then handles as any other: FAILED, outcome unknown,
the session paused for an operator.
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from django.utils import timezone

from audit.models import EventType as E
from governance.identity.principal import Principal
from governance.identity.rbac import EXECUTE, authorize
from governance.policy import engine as governance_policy
from sagas.coordinator._actions import Pinned
from sagas.coordinator._leases import LeaseRef, keep_alive, lease_seconds, let_go, worker_id
from sagas.coordinator._proxied_journal import KEPT_LEASES
from sagas.coordinator._tx import Tx, locked_saga
from sagas.coordinator.execution.attempts import new_step
from sagas.coordinator.proxy.calls import Answered, finish_in, write_answered
from sagas.coordinator.proxy.contract import snapshot
from sagas.coordinator.sql import statements
from sagas.errors import saga_not_found
from sagas.models import ProxyCallIntent, Step
from sagas.proxied_facts import CallFacts, CallOutcome, FinishedCall
from sagas.selectors.scope import parse_uuid
from sagas.states import StepStatus


def proxy_call_intend(
    *, actor: Principal, saga_id: object, call: CallFacts, arguments: dict[str, Any], step_id: uuid.UUID
) -> bool:
    """Journal the intent to send `call` as step `step_id` of the session, if the session is ACTIVE (for `actor`'s
    tenant) and no kill switch is engaged: whether it was. False changes nothing; the proxy then begins the call the
    long way (`proxy_call_begin`), which decides again and journals why it was not sent. While the intent stands,
    this process keeps its lease alive."""
    authorize(actor, EXECUTE, "execute")
    if call.gate != "allow" or call.method or governance_policy.engine() is not None:
        return False  # policy (audited with the step), a gate or a protocol read: decided the long way
    snapshot(call)  # PROXIED_CONTRACT_INVALID, as proxy_call_begin refuses it, before anything is written
    saga_pk = parse_uuid(saga_id)
    if saga_pk is None:
        raise saga_not_found(saga_id)
    intent = ProxyCallIntent(
        id=step_id,
        saga_id=saga_pk,
        call=call.model_dump_json(),
        arguments=arguments,
        principal_id=actor.principal_id,
        principal_type=actor.principal_type,
        lease_owner=worker_id(),
        created_at=timezone.now(),
    )
    if not statements.insert_intent(intent, actor.tenant_id, lease_seconds()):
        return False
    KEPT_LEASES[step_id] = keep_alive(LeaseRef(ProxyCallIntent, step_id, 1))
    return True


def proxy_calls_record(*, actor: Principal, saga_id: object, calls: Sequence[FinishedCall]) -> list[str]:
    """Record the outcomes of calls sent on an intent, in one transaction: each intent written as its step with its
    outcome (as a begin then a finish leave it), or, when another transaction wrote it as its EXECUTING step
    meanwhile, finished as `proxy_call_finish` finishes it (if this process still owns it). The session's other
    intents are left to their own records. The session need not be active any more: what was sent is recorded.
    Returns each step's status."""
    authorize(actor, EXECUTE, "execute")
    ids = [_step_uuid(done.step_id) for done in calls]
    handles = [KEPT_LEASES.pop(step_id, None) for step_id in ids]
    answered = {str(step_id): done.outcome for step_id, done in zip(ids, calls, strict=True)}
    try:
        with locked_saga(saga_id, actor, session=True, answered=answered, only_answered=True) as tx:
            statuses = [_finish_one(tx, step_id, done) for step_id, done in zip(ids, calls, strict=True)]
    except BaseException:
        for step_id, handle in zip(ids, handles, strict=True):
            if handle is not None:  # nothing was written: they stay kept until their outcomes are recorded
                KEPT_LEASES[step_id] = handle
        raise
    for handle in handles:
        if handle is not None:
            let_go(handle)
    return statuses


def _finish_one(tx: Tx, step_id: uuid.UUID, done: FinishedCall) -> str:
    """The call's status once its outcome is recorded: written with its step from its intent (materialize), or
    recorded on the step another transaction wrote it as meanwhile."""
    step = tx.materialized.get(str(step_id))
    if step is not None and step.status != StepStatus.EXECUTING:
        return step.status
    step = step or statements.step_of_saga(step_id, tx.saga.pk)
    return finish_in(tx, step, done.step_id, done.fence, done.outcome).status


def materialize(tx: Tx, intents: Sequence[ProxyCallIntent], answered: Mapping[str, CallOutcome]) -> None:
    """Write each of the session's intents as the step it stands for (its id, arguments and snapshot), with the
    events of the principal that made the call, oldest first; then drop the intents. A call in `answered` is
    written with its outcome, as a begin then a finish leave it; any other as EXECUTING under the intent's lease.
    Called by every transaction on the session before it decides anything (sagas.coordinator._tx)."""
    rows: list[Step] = []
    for intent in intents:
        pinned, audit = _pinned_of(intent.call)
        by = (intent.principal_id, intent.principal_type)
        outcome = answered.get(str(intent.id))
        if outcome is not None:
            step = write_answered(tx, pinned, intent.arguments, {"id": intent.id}, Answered(outcome, rows, by), audit)
        else:
            lease = {"id": intent.id, "lease_owner": intent.lease_owner, "lease_expires_at": intent.lease_expires_at}
            step = new_step(tx, pinned, intent.arguments, None, 1, **lease)
            tx.record(E.STEP_STARTED, step=step, status=StepStatus.EXECUTING, data={"attempt": 1, **audit}, by=by)
        tx.materialized[str(intent.id)] = step
    statements.insert_steps(rows)
    statements.delete_intents([intent.id for intent in intents])


@functools.lru_cache(maxsize=512)
def _pinned_of(call_json: str) -> tuple[Pinned, dict[str, Any]]:
    """The snapshot and audit facts of a call's facts as an intent keeps them (a session calls the same tools)."""
    call = CallFacts.model_validate_json(call_json)
    return snapshot(call), call.audit_facts()


def _step_uuid(value: object) -> uuid.UUID:
    return value if isinstance(value, uuid.UUID) else uuid.UUID(str(value))
