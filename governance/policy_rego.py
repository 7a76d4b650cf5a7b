"""Policy as code: the same Rego policy evaluated by an OPA server (`opa`) or in-process with regopy (`rego`).

Both send the sanitized facts (PolicyInput.as_dict) as `input` and read the decision at the configured path
(default `semantic_saga/decision`). A decision is `true`/`false` or an object {effect, reason, matched_rules,
budget}. Anything else fails closed: an undefined decision, an invalid shape, an error or a timeout is a deny
(rollback and rejection never reach policy, so failing closed cannot trap work in flight).
"""

from __future__ import annotations

import hashlib
import os
import threading
from pathlib import Path
from typing import Any

import httpx
from regopy import Interpreter

from governance.policy_engine import DEFAULT_RISK_WEIGHTS, Decision, PolicyFileError, PolicyInput

EFFECTS = frozenset({"allow", "deny", "require_approval"})


def decision_from_result(result: Any, *, backend: str, revision: str | None) -> Decision:
    """Read a boolean or object decision; every other shape is a fail-closed deny."""
    if isinstance(result, bool):
        return Decision("allow" if result else "deny", f"{backend} decision {str(result).lower()}", backend, revision)
    if not isinstance(result, dict) or result.get("effect") not in EFFECTS:
        return fail_closed(backend, revision, f"the {backend} decision has an invalid shape ({type(result).__name__})")
    rules = result.get("matched_rules") or []
    return Decision(
        effect=str(result["effect"]),
        reason=str(result.get("reason") or f"{backend} decided {result['effect']}"),
        backend=backend,
        revision=str(result.get("revision") or revision) if (result.get("revision") or revision) else None,
        matched_rules=tuple(str(r) for r in rules) if isinstance(rules, list) else (),
        budget=str(result["budget"]) if result.get("budget") else None,
    )


def fail_closed(backend: str, revision: str | None, why: str) -> Decision:
    return Decision(
        "deny", f"{why}; forward work fails closed until policy answers", backend, revision, ("fail-closed",)
    )


class _PolicyAsCode:
    """What Rego and OPA share: risk weights are the defaults (the policy owns its own budgets) and the status
    names where decisions come from instead of listing rules."""

    backend = ""
    revision: str | None = None

    def risk_units(self, risk: str) -> int:
        return DEFAULT_RISK_WEIGHTS.get(risk, 0)

    def source(self) -> dict[str, str]:
        raise NotImplementedError

    def status(self, tenant_id: str) -> dict[str, Any]:
        return {
            "tenant_id": tenant_id,
            "backend": self.backend,
            "revision": self.revision,
            "default_effect": None,
            "approval_at_or_above_risk": None,
            "budgets": {},
            "rule_ids": [],
            **self.source(),
        }


class RegoPolicy(_PolicyAsCode):
    """A Rego file evaluated in this process (no OPA server needed)."""

    backend = "rego"

    def __init__(self, path: str | Path, decision_path: str) -> None:
        self.path = Path(path)
        try:
            self.text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError as exc:
            raise PolicyFileError(message=f"Rego policy {path} does not exist. Set SAGA_POLICY_FILE to it.") from exc
        self.revision = "sha256:" + hashlib.sha256(self.text.encode()).hexdigest()[:12]
        self.query = "data." + decision_path.strip("/").replace("/", ".")
        self._lock = threading.Lock()  # one interpreter, one input at a time
        self._interpreter = Interpreter()
        try:
            self._interpreter.add_module(self.path.stem, self.text)
            self._interpreter.set_input({})
            self._interpreter.query(self.query)
        except Exception as exc:  # regopy raises its own error types for syntax and type errors
            raise PolicyFileError(message=f"Rego policy {path} does not compile: {exc}. Nothing was loaded.") from exc

    def evaluate(self, facts: PolicyInput) -> Decision:
        try:
            with self._lock:
                self._interpreter.set_input(facts.as_dict())
                output = self._interpreter.query(self.query)
            expressions = output.results[0].expressions if output.results else []
        except Exception as exc:  # an evaluation error must not let work through
            return fail_closed(
                self.backend, self.revision, f"the Rego policy failed to evaluate ({type(exc).__name__})"
            )
        if not expressions:
            return fail_closed(self.backend, self.revision, f"{self.query} is undefined for this input")
        return decision_from_result(expressions[0], backend=self.backend, revision=self.revision)

    def source(self) -> dict[str, str]:
        return {"decision_query": self.query}


class OpaPolicy(_PolicyAsCode):
    """An OPA server's Data API: POST {url}/v1/data/{decision path} with {"input": facts}."""

    backend = "opa"

    def __init__(self, url: str, decision_path: str, *, token_env: str, timeout: float) -> None:
        self.endpoint = f"{url.rstrip('/')}/v1/data/{decision_path.strip('/')}"
        self.token_env = token_env
        self.timeout = timeout
        self.revision = None

    def evaluate(self, facts: PolicyInput) -> Decision:
        headers = {}
        token = os.environ.get(self.token_env) if self.token_env else None
        if token:
            headers["Authorization"] = f"Bearer {token}"
        try:
            answer = httpx.post(self.endpoint, json={"input": facts.as_dict()}, headers=headers, timeout=self.timeout)
            answer.raise_for_status()
            body = answer.json()
        except httpx.TimeoutException:
            return fail_closed(self.backend, None, f"OPA did not answer within {self.timeout:g}s")
        except (httpx.HTTPError, ValueError) as exc:
            return fail_closed(self.backend, None, f"OPA could not be asked ({type(exc).__name__})")
        if not isinstance(body, dict) or "result" not in body:
            return fail_closed(self.backend, None, "the OPA decision is undefined for this input")
        return decision_from_result(body["result"], backend=self.backend, revision=None)

    def source(self) -> dict[str, str]:
        return {"decision_endpoint": self.endpoint}
