"""Guards the node operations share, inside the saga's transaction: the saga's state, and finding a node of it."""

from __future__ import annotations

from sagas.coordinator._tx import Tx
from sagas.errors import InvalidTransition, NotFound
from sagas.models import Node
from sagas.selectors.scope import parse_uuid
from sagas.states import SagaStatus


def require_status(tx: Tx, allowed: frozenset[str], what: str) -> None:
    if tx.saga.status not in allowed:
        raise InvalidTransition(
            "SAGA_NOT_ACTIVE",
            f"Saga {tx.saga.id} is {tx.saga.status}; {what} needs {' or '.join(sorted(allowed))}. Nothing was "
            "changed."
            + (
                " A RECOVERY_REQUIRED saga needs retry_saga_step or rollback first."
                if tx.saga.status == SagaStatus.RECOVERY_REQUIRED
                else ""
            ),
        )


def find_node(tx: Tx, node_ref: object) -> Node:
    """A node of this saga by id or key; another saga's node is reported as missing."""
    nodes = Node.objects.filter(saga=tx.saga)
    parsed = parse_uuid(node_ref)
    node = nodes.filter(pk=parsed).first() if parsed else None
    if node is None and isinstance(node_ref, str):
        node = nodes.filter(key=node_ref).first()
    if node is None:
        raise NotFound(
            "NODE_NOT_FOUND",
            f"Node not found in saga {tx.saga.id}: {node_ref}. Nothing was changed. get_saga lists its nodes.",
        )
    return node
