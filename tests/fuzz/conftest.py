"""Fuzz fixtures: the protocol tests' real `semantic-saga serve` per module, committed rows, and one saga per tenant
(the other tenant's carries OUTSIDER_MARKER, so any leak of its data is visible in an answer)."""

from __future__ import annotations

import pytest

from sagas import coordinator
from sagas.models import A2ATask, Approval, Checkpoint, McpTask, Node, Saga, Step
from tests.conftest import make_principal
from tests.contracts import http_contract, register
from tests.fuzz.hostile import OUTSIDER_MARKER, Seeded
from tests.protocols.conftest import _committed_db, server  # noqa: F401  (fixtures used by the fuzz modules)

ROW_MODELS = (Saga, Node, Step, Approval, Checkpoint, McpTask, A2ATask)


def rows() -> dict[str, int]:
    """Rows a refused call must not add (audit events are not counted: a refusal may be audited on purpose)."""
    return {model.__name__: model.objects.count() for model in ROW_MODELS}


@pytest.fixture
def seeded() -> Seeded:
    """A waiting node in a saga of acme (alice's tenant) and one of globex (mallory's), keyed "w"."""
    # Gated, so that nothing a fuzzed call plans runs on its own; port 9 (discard) is never listened on here.
    register(http_contract("fuzz.wire", "http://127.0.0.1:9", approval_required=True))
    ids = []
    for who, tenant, metadata in (("alice", "acme", {"owner": "acme"}), ("mallory", "globex", {"o": OUTSIDER_MARKER})):
        actor = make_principal(who, tenant, "operator")
        saga = coordinator.saga_begin(actor=actor, metadata=metadata)
        node = coordinator.node_plan(actor=actor, saga_id=saga.id, action="fuzz.wire", input={"m": metadata}, key="w")
        ids += [str(saga.id), str(node.id)]
    return Seeded(*ids)
