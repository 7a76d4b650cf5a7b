"""The one way saga state changes: a short transaction that locks the saga row, applies table-checked
compare-and-set transitions, and appends their audit events to the saga's chain before commit.

Lock order: the saga row first (`FOR NO KEY UPDATE`: we never change its key, and this still lets other sessions
insert steps and nodes that reference it), then nodes by pk. Every writer of one saga takes that lock, which is
also what serializes the per-saga audit chain.

A call refused inside the transaction (by policy, a kill switch or an expired approval) raises `Refusal`: the
transaction still commits what it recorded, above all the evidence of the refusal, and the refusal's error is
raised to the caller after commit. Raising the error itself inside the block would roll that evidence back.

Round trips are the hot path's cost (docs/benchmarks.md), so one transaction spends as few as it can: the lock
query also answers "is a kill switch engaged?", the chain's head (last sequence and hash) lives on the saga row
read by that same lock, and plain field writes to the saga row are gathered and written once, with the new head,
just before commit.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from django.db import connection, models, transaction
from django.utils import timezone

from audit import chain, telemetry
from governance.errors import ServiceError
from governance.identity.principal import Principal
from sagas.coordinator._event_facts import transition_facts
from sagas.coordinator._journal_digests import JournalWrites
from sagas.coordinator.sql import pipeline, statements
from sagas.errors import InvalidTransition, StaleState, saga_not_found
from sagas.models import Approval, Node, ProxyCallIntent, Saga, Step
from sagas.selectors.scope import parse_uuid
from sagas.states import can_transition

_KIND_OF: dict[type[models.Model], str] = {Saga: "saga", Node: "node", Step: "step", Approval: "approval"}
# Rows stamped with updated_at on every write (an approval's one change is its decision, stamped decided_at).
_STAMPED: frozenset[type[models.Model]] = frozenset({Saga, Node, Step})


class Refusal(Exception):
    """Refuse the call from inside a `locked_saga` block while keeping what it recorded: the transaction commits,
    then `error` is raised to the caller. Not a ServiceError, so no `except SagaError` in the block can swallow it."""

    def __init__(self, error: ServiceError) -> None:
        super().__init__(str(error))
        self.error = error


class Tx:
    """State changes of one saga inside one transaction, with their audit events."""

    def __init__(self, saga: Saga, actor: Principal) -> None:
        self.saga = saga
        self.actor = actor
        self._drafts: list[chain.EventDraft] = []
        self._saga_fields: dict[str, Any] = {}
        self.also_rows: list[list[tuple[Any, ...]]] = []  # rows of the reads made with the lock (locked_saga)
        # A proxy session's call intents this transaction turned into EXECUTING steps, by step id (_take_intents).
        self.materialized: dict[str, Step] = {}
        # A proxy session's journaled values written here, whose digests its events carry (issue 39).
        self.journal = JournalWrites(saga.is_proxy_session, saga.id)

    def record(
        self,
        event_type: str,
        *,
        node: Node | None = None,
        step: Step | None = None,
        status: str = "",
        data: dict[str, Any] | None = None,
        action: tuple[str, str] | None = None,
        by: tuple[str, str] | None = None,
    ) -> None:
        """Append an event; its action is the step's or node's, else `action` (id, version) when one is named. `by`
        (principal id, type) names who did it when that is not the transaction's actor (a call's intent, written as
        a step by another transaction: sagas.coordinator.proxy.intents)."""
        action_source: Node | Step | None = step or node
        named = (action_source.action, action_source.action_version) if action_source else (action or ("", ""))
        trace_id, span_id = telemetry.current_ids()
        self._drafts.append(
            chain.EventDraft(
                event_type=event_type,
                actor_principal_id=by[0] if by else self.actor.principal_id,
                actor_type=by[1] if by else self.actor.principal_type,
                action=named[0],
                action_version=named[1],
                step_id=str(step.id) if step else (str(node.step_id) if node and node.step_id else ""),
                node_id=str(node.id) if node else (str(step.node_id) if step and step.node_id else ""),
                status=status,
                data=data or {},
                trace_id=trace_id,
                span_id=span_id,
            )
        )

    def transition(
        self,
        obj: Saga | Node | Step | Approval,
        to: str,
        *,
        event: str | None = None,
        event_data: Any = None,  # dict | None; Any because callers spread **fields dicts mypy would match to it
        **fields: Any,
    ) -> None:
        """Compare-and-set `obj.status` to `to` (plus `fields`), refusing moves the state table does not list.

        Raises InvalidTransition (the table has no such move; nothing is written) or StaleState (the row is no
        longer in the state `obj` says: another writer got there first). `event` is recorded on success, its data
        the row's facts (_event_facts) plus `event_data`; an approval's event names its node and the approval id.
        """
        kind = _KIND_OF[type(obj)]
        current = obj.status
        if not can_transition(kind, current, to):
            raise InvalidTransition(
                message=f"A {kind} cannot move from {current} to {to}. Nothing was changed. "
                "Read the saga again (get_saga) to see its current state.",
            )
        stamp = {"updated_at": timezone.now()} if type(obj) in _STAMPED else {}
        stale = (
            f"The {kind} {obj.pk} is no longer {current}: another request changed it first. "
            "Nothing was changed by this call. Read the saga again and decide from its current state."
        )
        values = {"status": to, **stamp, **fields}
        if not statements.cas_status(type(obj), obj.pk, current, values, stale_message=stale):
            raise StaleState(message=stale)
        obj.status = to
        _apply(obj, {**stamp, **fields})
        self.journal.note(obj, ("status", *fields))
        if event:
            self._record_transition(obj, event, to, event_data or {})

    def _record_transition(
        self, obj: Saga | Node | Step | Approval, event: str, to: str, event_data: dict[str, Any]
    ) -> None:
        data = {**transition_facts(obj, event), **event_data}
        if isinstance(obj, Approval):
            self.record(event, node=obj.node, status=to, data=data)
        else:
            self.record(
                event,
                node=obj if isinstance(obj, Node) else None,
                step=obj if isinstance(obj, Step) else None,
                status=to,
                data=data,
            )

    def update(self, obj: Saga | Node | Step, **fields: Any) -> None:
        """Write non-status fields of a row whose status this transaction already holds under the saga lock.

        Plain values for the locked saga row are written once at flush (the row is ours until commit, and nothing
        in the transaction reads them back from the database); everything else is written now.
        """
        now = timezone.now()
        if obj is self.saga and not any(hasattr(v, "resolve_expression") for v in fields.values()):
            self._saga_fields.update(fields)
        else:
            statements.update_row(type(obj), obj.pk, {"updated_at": now, **fields})
        _apply(obj, fields)
        obj.updated_at = now
        self.journal.note(obj, fields)

    def update_many(self, nodes: list[Node], **fields: Any) -> None:
        """`update` for several nodes of this saga in one statement (fan-out nudges)."""
        if not nodes:
            return
        now = timezone.now()
        Node.objects.filter(pk__in=[n.pk for n in nodes]).update(updated_at=now, **fields)
        for node in nodes:
            _apply(node, fields)
            node.updated_at = now

    def transition_many(self, nodes: list[Node], to: str, *, event: str | None = None) -> None:
        """`transition` for several nodes in the same state, in one compare-and-set statement (a fan-out's
        dependants becoming READY together)."""
        if len(nodes) < 2:
            for node in nodes:
                self.transition(node, to, event=event)
            return
        current = {n.status for n in nodes}
        if len(current) != 1 or not can_transition("node", next(iter(current)), to):
            raise InvalidTransition(
                message=f"Nodes cannot all move from {sorted(current)} to {to}. Nothing was changed. "
                "Read the saga again (get_saga) to see its current state."
            )
        now = timezone.now()
        changed = Node.objects.filter(pk__in=[n.pk for n in nodes], status=next(iter(current))).update(
            status=to, updated_at=now
        )
        if changed != len(nodes):
            raise StaleState(
                message="Another request changed these nodes first. Nothing was changed by this call. Read the saga "
                "again and decide from its current state."
            )
        for node in nodes:
            node.status, node.updated_at = to, now
            if event:
                self.record(event, node=node, status=to, data=transition_facts(node, event))

    def flush(self) -> None:
        """Append the recorded events to the chain and write the saga row's gathered fields with the new head."""
        self._drafts = self.journal.stamped(self._drafts, self.saga.audit_sequence)
        if self._drafts:
            head = (self.saga.audit_sequence, self.saga.audit_head_hash or None)
            rows = chain.link(saga_id=self.saga.id, tenant_id=self.saga.tenant_id, drafts=self._drafts, head=head)
            statements.insert_events(rows)
            self._saga_fields.update(audit_sequence=rows[-1].sequence, audit_head_hash=rows[-1].event_hash)
            self._drafts.clear()
        if self._saga_fields:
            stamped = {"updated_at": timezone.now(), **self._saga_fields}
            statements.update_row(Saga, self.saga.pk, stamped)
            _apply(self.saga, stamped)  # the caller's saga says what the row now says, its stamp included
            self._saga_fields.clear()


def _apply(obj: models.Model, fields: dict[str, Any]) -> None:
    for name, value in fields.items():
        # A value computed by the database (a lease deadline from now()) is not copied: refresh to read it.
        if not hasattr(value, "resolve_expression"):
            setattr(obj, name, value)


@contextmanager
def locked_saga(
    saga_id: object,
    actor: Principal,
    *,
    also: Sequence[statements.SqlQuery] = (),
    session: bool = False,
    answered: Mapping[str, Any] | None = None,
    only_answered: bool = False,
) -> Iterator[Tx]:
    """Open a durable transaction holding the saga row lock; audit events are appended just before commit.

    A `Refusal` raised in the block commits what was recorded, then raises its error after commit. The rows of the
    reads `also` (made under the lock, in its round trip) are `tx.also_rows`. A proxy session's call intents are
    first written as the EXECUTING steps they stand for (`tx.materialized`): `session`, when the caller knows the
    saga is one, reads them in the lock's round trip; `answered` (step id: outcome) are written as answered, and
    with `only_answered` the others are left as they are (the proxy recording what its own calls did: each of its
    calls still out is recorded by its own line, in the order they were answered).
    """
    parsed = parse_uuid(saga_id)
    if parsed is None:
        raise saga_not_found(saga_id)
    refused: ServiceError | None = None
    skip = only_answered and not answered
    intents = [statements.intents_of_saga_query(parsed)] if session and not skip else []
    with _durable() as commit:
        saga, extra = statements.lock_saga(parsed, actor.tenant_id, also=[*also, *intents])
        if saga is None:
            raise saga_not_found(saga_id)
        tx = Tx(saga, actor)
        tx.also_rows = extra[: len(also)]
        if not skip:
            _take_intents(tx, extra[len(also)] if intents else None, answered, only_answered)
        try:
            yield tx
        except Refusal as refusal:
            refused = refusal.error
        tx.flush()
        commit()
    if refused is not None:
        raise refused


IntentWriter = Callable[[Tx, list[ProxyCallIntent], Mapping[str, Any]], None]
_intent_writer: list[IntentWriter] = []


def write_intents_with(writer: IntentWriter) -> None:
    """Name the function that writes a proxy session's intents as steps (sagas.coordinator.proxy.intents.
    materialize, which builds on this module): set once, by the coordinator package as it is imported, before any
    transaction can run."""
    _intent_writer[:] = [writer]


def _take_intents(
    tx: Tx, found: list[tuple[Any, ...]] | None, answered: Mapping[str, Any] | None = None, only_answered: bool = False
) -> None:
    """Write a proxy session's call intents as their EXECUTING steps (those in `answered` with their outcome) before
    anything else (`found`: the intents query's rows, when it rode with the lock), so whatever this transaction
    decides sees every call sent."""
    if not tx.saga.is_proxy_session:
        return
    # A transaction that is not the proxy's own (`found` None: an operator's, the sweep's) holds the session FOR
    # UPDATE before it reads them, so an intent made meanwhile waits for its end (statements.insert_intent).
    intents = statements.intents_under_lock(tx.saga.pk) if found is None else statements.intents_from(found)
    if intents:
        if only_answered:
            intents = [intent for intent in intents if str(intent.id) in (answered or {})]
        if not _intent_writer:  # a programming error: nothing may be decided without the calls already sent
            raise RuntimeError("no writer of proxy call intents: import sagas.coordinator before using its modules")
        _intent_writer[0](tx, intents, answered or {})


@contextmanager
def _durable() -> Iterator[Callable[[], None]]:
    """`transaction.atomic(durable=True)` whose row writes are queued and sent with the next read, the last ones
    with COMMIT (sagas.coordinator.sql.pipeline, on PostgreSQL). Yields `commit`, to call as the block's last
    statement; a compare-and-set that found its row changed fails the transaction there (or at the read) as
    StaleState."""
    try:
        with transaction.atomic(durable=True), pipeline.write_behind() as queue:
            yield (lambda: queue.finish(commit=pipeline.outermost(connection))) if queue else _nothing
    except pipeline.StaleWrite as stale:
        raise StaleState(message=str(stale)) from None


def _nothing() -> None:
    return None


@contextmanager
def new_saga_tx(saga: Saga, actor: Principal) -> Iterator[Tx]:
    """The transaction that creates a saga (nothing to lock yet, nothing to refuse)."""
    with _durable() as commit:
        statements.insert_saga(saga)
        tx = Tx(saga, actor)
        yield tx
        tx.flush()
        commit()


@contextmanager
def system_saga_tx(saga_id: uuid.UUID, *, skip_locked: bool = True) -> Iterator[Tx | None]:
    """A transaction on any tenant's saga as the coordinator itself (sweeps). With skip_locked, a saga another
    process holds is skipped (None) rather than waited for: PostgreSQL FOR NO KEY UPDATE SKIP LOCKED."""
    from governance.identity.principal import system_principal

    with _durable() as commit:
        saga, _ = statements.lock_saga(saga_id, None, skip_locked=skip_locked)
        if saga is None:
            yield None
            return
        tx = Tx(saga, system_principal(saga.tenant_id))
        _take_intents(tx, None)
        yield tx
        tx.flush()
        commit()
