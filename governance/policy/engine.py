"""Tenant governance: may THIS action, resource and risk happen NOW? (docs/policy_governance.md)

Backends by SAGA_POLICY_MODE: `none` (default: nothing is restricted, so upgrading never silently restricts),
`json` (a schema-validated file, governance.policy.json_rules), `opa` (an OPA server) and `rego` (the same Rego
evaluated in-process; governance.policy.rego, governance.policy.opa). The coordinator calls `evaluate` at plan,
execute, run (per saga and again per node right before its side effect), approve, retry and commit, and audits every
decision; rollback and rejection are never subject to business policy.

A reload that changes the policy in force is recorded in the deployment's control-plane audit chain
(governance.policy.revision), once per change whatever the number of processes.
"""

from __future__ import annotations

import logging
import os
import threading
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.core.exceptions import SynchronousOnlyOperation
from django.db import DatabaseError, transaction

from governance.policy import revision as policy_revision
from governance.policy.facts import DEFAULT_RISK_WEIGHTS, Decision, PolicyInput
from registry.semantics import RISKS, risk_of

if TYPE_CHECKING:  # the backends are imported by _build, when one is configured (mode none loads none of them)
    from governance.policy.revision import PolicyBackend

logger = logging.getLogger(__name__)

BACKEND_NONE = "none"

_lock = threading.Lock()
_loaded: dict[str, Any] = {"key": None, "engine": None}
# The engine key whose revision this process has seen recorded in the audit chain (nothing to check until it moves).
_recorded: dict[str, Any] = {"key": None}


def engine() -> PolicyBackend | None:
    """The configured policy, reloaded when its file or settings change (an edited policy applies at once)."""
    mode = settings.SAGA_POLICY_MODE
    if mode == BACKEND_NONE:
        _note_revision((BACKEND_NONE,), None)
        return None
    path = settings.SAGA_POLICY_FILE
    stamp = os.stat(path).st_mtime_ns if mode in ("json", "rego") else None
    key = (mode, path, stamp, settings.SAGA_OPA_URL, settings.SAGA_OPA_DECISION_PATH)
    with _lock:
        if _loaded["key"] != key:
            _loaded["engine"] = _build(mode, path)
            _loaded["key"] = key
        found: PolicyBackend = _loaded["engine"]
    _note_revision(key, found)
    return found


def _note_revision(key: tuple[Any, ...], policy: PolicyBackend | None) -> None:
    """Make sure the policy now in force is the newest revision in the audit chain (once per process and change).

    Inside a transaction the check waits for its commit: a policy decision's transaction stays as it was (no
    extra query, no lock on the deployment chain), and a rollback cannot take the evidence with it (the next call
    tries again). A database that cannot answer (not migrated yet, an async context) is retried at the next call.
    """
    if _recorded["key"] == key:
        return
    if transaction.get_connection().in_atomic_block:
        transaction.on_commit(lambda: _note_revision(key, policy), robust=True)
        return
    try:
        with transaction.atomic(durable=True):
            policy_revision.record_if_changed(policy_revision.state_of(policy))
    except (DatabaseError, SynchronousOnlyOperation) as exc:
        logger.warning("The policy revision in force could not be recorded yet (%s); retrying at the next use.", exc)
        return
    _recorded["key"] = key


def _build(mode: str, path: str) -> PolicyBackend:
    if mode == "json":
        from governance.policy.json_rules import JsonPolicy

        return JsonPolicy.load(path)
    if mode == "rego":
        from governance.policy.rego import RegoPolicy

        return RegoPolicy(path, settings.SAGA_OPA_DECISION_PATH)
    from governance.policy.opa import OpaPolicy

    return OpaPolicy(
        settings.SAGA_OPA_URL,
        settings.SAGA_OPA_DECISION_PATH,
        token_env=settings.SAGA_OPA_TOKEN_ENV,
        timeout=settings.SAGA_OPA_TIMEOUT_SECONDS,
    )


NO_POLICY = Decision(
    "allow", "no governance backend is configured (SAGA_POLICY_MODE=none)", BACKEND_NONE, None, decision_id="none"
)


def evaluate(facts: PolicyInput) -> Decision:
    policy = engine()
    return NO_POLICY if policy is None else policy.evaluate(facts)


def risk_units(risk: str) -> int:
    policy = engine()
    return policy.risk_units(risk) if policy is not None else DEFAULT_RISK_WEIGHTS.get(risk_of(risk), 0)


def policy_status(tenant_id: str) -> dict[str, Any]:
    """The policy in force for `tenant_id`, whatever the backend.

    `risk_weights` (semantic-saga-mcp's field, the same shape: risk level -> units) are the units each risk
    counts against `budgets.max_risk_units`, exactly as `risk_units` counts them: a JSON policy's `risk_weights`
    over the defaults, the defaults for Rego, OPA and no policy (without a policy no budget applies)."""
    from governance.kill_switch import engaged

    stopped = engaged(tenant_id) is not None
    policy = engine()
    weigh = policy.risk_units if policy is not None else DEFAULT_RISK_WEIGHTS.__getitem__
    weights = {level: weigh(level) for level in RISKS}
    if policy is not None:
        return {**policy.status(tenant_id), "risk_weights": weights, "kill_switch": stopped}
    return {
        "tenant_id": tenant_id,
        "backend": BACKEND_NONE,
        "revision": None,
        "default_effect": "allow",
        "approval_at_or_above_risk": None,
        "budgets": {},
        "rule_ids": [],
        "risk_weights": weights,
        "kill_switch": stopped,
    }
