"""Journaling a step: the one place a step row of a saga is created, next in its sequence, with the contract snapshot
it pins. The attempts of nodes and immediate steps (sagas.coordinator.execution.attempts) and the proxied calls
refused before they were sent (sagas.coordinator._proxied_journal) journal theirs here."""

from __future__ import annotations

from typing import Any

from sagas.coordinator._actions import Pinned
from sagas.coordinator._tx import Tx
from sagas.coordinator.sql import statements
from sagas.models import Node, Step


def journal_step(
    tx: Tx, pinned: Pinned, payload: dict[str, Any], node: Node | None, *, insert: bool = True, **fields: Any
) -> Step:
    """A new step row of the saga, next in sequence, with the contract snapshot; `fields` set its status and the
    rest (an EXECUTING attempt from new_step, a proxied call that was refused before it was sent, ...). Without
    `insert`, the caller inserts the row itself before its transaction ends (several in one statement)."""
    step = Step(
        saga=tx.saga,
        sequence=tx.saga.next_sequence,
        node=node,
        action=pinned.action,
        action_version=pinned.version,
        action_definition_hash=pinned.definition_hash,
        action_definition=pinned.definition,
        input=payload,
        **fields,
    )
    if insert:
        statements.insert_steps([step])  # the ORM's save, without its per-call query building
    tx.journal.note_new(step)
    tx.update(tx.saga, next_sequence=tx.saga.next_sequence + 1)
    return step
