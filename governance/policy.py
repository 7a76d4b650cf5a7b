"""Tenant governance: may THIS action, resource and risk happen NOW? (docs/policy_governance.md)

Backends by SAGA_POLICY_MODE: `none` (default: nothing is restricted, so upgrading never silently restricts),
`json` (a schema-validated file, governance.policy_engine), `opa` (an OPA server) and `rego` (the same Rego
evaluated in-process; governance.policy_rego). The coordinator calls `evaluate` at plan, execute,
run (per saga and again per node right before its side effect), approve, retry and commit, and audits every
decision; rollback and rejection are never subject to business policy.
"""

from __future__ import annotations

import os
import threading
from typing import Any

from django.conf import settings

from governance.policy_engine import Decision, JsonPolicy, PolicyInput
from governance.policy_rego import OpaPolicy, RegoPolicy

PolicyBackend = JsonPolicy | RegoPolicy | OpaPolicy

BACKEND_NONE = "none"
DEFAULT_RISK_WEIGHTS = {"low": 1, "medium": 3, "high": 10, "critical": 30}

_lock = threading.Lock()
_loaded: dict[str, Any] = {"key": None, "engine": None}


def engine() -> PolicyBackend | None:
    """The configured policy, reloaded when its file or settings change (an edited policy applies at once)."""
    mode = settings.SAGA_POLICY_MODE
    if mode == BACKEND_NONE:
        return None
    path = settings.SAGA_POLICY_FILE
    stamp = os.stat(path).st_mtime_ns if mode in ("json", "rego") else None
    key = (mode, path, stamp, settings.SAGA_OPA_URL, settings.SAGA_OPA_DECISION_PATH)
    with _lock:
        if _loaded["key"] != key:
            _loaded["engine"] = _build(mode, path)
            _loaded["key"] = key
        found: PolicyBackend = _loaded["engine"]
        return found


def _build(mode: str, path: str) -> PolicyBackend:
    if mode == "json":
        return JsonPolicy.load(path)
    if mode == "rego":
        return RegoPolicy(path, settings.SAGA_OPA_DECISION_PATH)
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
    return policy.risk_units(risk) if policy is not None else DEFAULT_RISK_WEIGHTS.get(risk, 0)


def policy_status(tenant_id: str) -> dict[str, Any]:
    from governance.kill_switch import engaged

    stopped = engaged(tenant_id) is not None
    policy = engine()
    if policy is not None:
        return {**policy.status(tenant_id), "kill_switch": stopped}
    return {
        "tenant_id": tenant_id,
        "backend": BACKEND_NONE,
        "revision": None,
        "default_effect": "allow",
        "approval_at_or_above_risk": None,
        "budgets": {},
        "rule_ids": [],
        "kill_switch": stopped,
    }
