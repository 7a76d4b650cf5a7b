"""Reads: tenant-scoped lookups, listings, evidence and the shapes they answer with. They never change state and
never import the coordinator (the coordinator may import them).

One module per subject: `scope` (parse an id, the actor's tenant's sagas), `sagas` (one saga, the saga list),
`pages` (keyset pages and their cursors), `audit_trail` (audit events, chain verification), `timeline`,
`approvals` (pending requests, binding approvals, what an approver judges), `approval_queue` (the queue as keyset
pages), `preview_reports`, `proxy_sessions` (the MCP proxy's sessions and held calls), `policy` (governance
status) and `shapes` (the result shapes agents see). The functions
surfaces call are named here, as `sagas.coordinator` names its own.

Each is loaded when first read (PEP 562), not with the package: importing any selector module runs this file first,
and an operator's `semantic-saga status` that reads three of them would otherwise load the approval queue, its
shapes and the registry behind them.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sagas.selectors.approval_queue import ApprovalPage, approvals_pending
    from sagas.selectors.approval_requests import pending_approvals
    from sagas.selectors.audit_trail import audit_event_to_dict, saga_audit_events, saga_verify_audit
    from sagas.selectors.pages import decode_keyset_cursor, encode_keyset_cursor
    from sagas.selectors.policy import policy_status
    from sagas.selectors.preview_reports import preview_report
    from sagas.selectors.proxy_sessions import held_call_decision, held_call_node, held_calls_pending
    from sagas.selectors.sagas import SagaPage, saga_get, saga_list
    from sagas.selectors.timeline import saga_timeline

# Each name -> the module of this package that defines it.
_MODULES = {
    "ApprovalPage": "approval_queue",
    "SagaPage": "sagas",
    "approvals_pending": "approval_queue",
    "audit_event_to_dict": "audit_trail",
    "decode_keyset_cursor": "pages",
    "encode_keyset_cursor": "pages",
    "held_call_decision": "proxy_sessions",
    "held_call_node": "proxy_sessions",
    "held_calls_pending": "proxy_sessions",
    "pending_approvals": "approval_requests",
    "policy_status": "policy",
    "preview_report": "preview_reports",
    "saga_audit_events": "audit_trail",
    "saga_get": "sagas",
    "saga_list": "sagas",
    "saga_timeline": "timeline",
    "saga_verify_audit": "audit_trail",
}

__all__ = [
    "ApprovalPage",
    "SagaPage",
    "approvals_pending",
    "audit_event_to_dict",
    "decode_keyset_cursor",
    "encode_keyset_cursor",
    "held_call_decision",
    "held_call_node",
    "held_calls_pending",
    "pending_approvals",
    "policy_status",
    "preview_report",
    "saga_audit_events",
    "saga_get",
    "saga_list",
    "saga_timeline",
    "saga_verify_audit",
]


def __getattr__(name: str) -> Any:
    """A name of __all__, from its module; kept here, so only its first read comes this way."""
    module = _MODULES.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value
