"""The `rego` backend: a Rego file evaluated in this process with regopy (no OPA server needed)."""

from __future__ import annotations

import hashlib
import threading
from pathlib import Path

from regopy import Interpreter

from governance.policy.as_code import PolicyAsCode
from governance.policy.facts import Decision, PolicyFileError, PolicyInput, decision_from_result, fail_closed


class RegoPolicy(PolicyAsCode):
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
