"""Reads: tenant-scoped lookups, listings, evidence and the shapes they answer with. They never change state and
never import the coordinator (the coordinator may import them).

One module per subject: `scope` (parse an id, the actor's tenant's sagas), `sagas` (one saga, the saga list),
`pages` (keyset pages and their cursors), `audit_trail` (audit events, chain verification), `timeline`,
`approvals` (pending requests, binding approvals, what an approver judges), `approval_queue` (the queue as keyset
pages), `preview_reports`, `proxy_sessions` (the MCP proxy's sessions and held calls), `policy` (governance
status) and `shapes` (the result shapes agents see). The functions
surfaces call are named here, as `sagas.coordinator` names its own.
"""

from sagas.selectors.approval_queue import ApprovalPage, approvals_pending
from sagas.selectors.approvals import pending_approvals
from sagas.selectors.audit_trail import audit_event_to_dict, saga_audit_events, saga_verify_audit
from sagas.selectors.pages import decode_keyset_cursor, encode_keyset_cursor
from sagas.selectors.policy import policy_status
from sagas.selectors.preview_reports import preview_report
from sagas.selectors.proxy_sessions import held_call_decision, held_call_node, held_calls_pending, proxy_sessions
from sagas.selectors.sagas import SagaPage, saga_get, saga_list
from sagas.selectors.timeline import saga_timeline

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
    "proxy_sessions",
    "saga_audit_events",
    "saga_get",
    "saga_list",
    "saga_timeline",
    "saga_verify_audit",
]
