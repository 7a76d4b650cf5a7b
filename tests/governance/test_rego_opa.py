"""Policy as code: in-process Rego and an OPA server (a real local HTTP server evaluating the same Rego file)."""

from __future__ import annotations

import contextlib
import itertools
import json
import random
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from regopy import Interpreter

from governance.policy.facts import PolicyFileError, PolicyInput
from governance.policy.json_rules import JsonPolicy
from governance.policy.opa import OpaPolicy
from governance.policy.rego import RegoPolicy
from tests.governance.facts import policy_facts

ROOT = Path(__file__).resolve().parents[2]
REGO = ROOT / "examples" / "policy.rego"
JSON = ROOT / "examples" / "governance_policy.json"
QUERY_PATH = "semantic_saga/decision"


_facts = policy_facts


def _grid() -> Iterator[PolicyInput]:
    """Combinations that reach every step of the evaluation order of the example policy."""
    for tenant, phase, risk, reversibility, kind, roles, domain, operation, counters in itertools.product(
        ["acme", "globex"],
        ["plan", "execute", "run", "approve", "retry", "commit"],
        ["low", "medium", "high", "critical"],
        ["compensable", "irreversible", "unknown", "read_only"],
        ["user", "agent"],
        [frozenset({"operator"}), frozenset({"viewer"})],
        ["payments", "files"],
        ["charge", "delete", "read"],
        [(0, 0, 0, 1), (50, 40, 95, 9), (200, 200, 0, 17)],
    ):
        steps, planned, units, parallel = counters
        yield _facts(
            tenant_id=tenant,
            phase=phase,
            risk=risk,
            reversibility=reversibility,
            principal_type=kind,
            roles=roles,
            domain=domain,
            operation=operation,
            saga_steps=steps,
            saga_planned_nodes=planned,
            saga_risk_units=units,
            requested_parallel=parallel,
        )


# Every combination takes too long in-process; a fixed sample still reaches every evaluation step.
SAMPLE = 1200


def test_rego_gives_the_same_decisions_as_json_on_the_example_policies():
    json_policy, rego_policy = JsonPolicy.load(JSON), RegoPolicy(REGO, QUERY_PATH)
    checked = 0
    seen: set[tuple[str, ...]] = set()
    for facts in random.Random(7).sample(list(_grid()), SAMPLE):
        expected, got = json_policy.evaluate(facts), rego_policy.evaluate(facts)
        assert (got.effect, got.matched_rules, got.budget) == (
            expected.effect,
            expected.matched_rules,
            expected.budget,
        ), facts
        seen.add((expected.effect, *expected.matched_rules, expected.budget or ""))
        checked += 1
    assert checked == SAMPLE
    # the sample reached budgets, rules, the threshold and the default
    reached = {part for outcome in seen for part in outcome}
    assert {"acme-approvers-only", "threshold:high", "max_planned_nodes", "deny", "allow"} <= reached


def test_invalid_rego_refuses_to_load(tmp_path: Path):
    broken = tmp_path / "broken.rego"
    broken.write_text("package semantic_saga\n\ndecision := {")
    with pytest.raises(PolicyFileError) as refused:
        RegoPolicy(broken, QUERY_PATH)
    assert "does not compile" in refused.value.message and str(broken) in refused.value.message


def test_undefined_rego_decision_fails_closed(tmp_path: Path):
    partial = tmp_path / "partial.rego"
    partial.write_text('package semantic_saga\nimport rego.v1\ndecision := true if { input.phase == "commit" }\n')
    policy = RegoPolicy(partial, QUERY_PATH)
    assert policy.evaluate(_facts(phase="commit")).effect == "allow"
    decision = policy.evaluate(_facts(phase="plan"))
    assert decision.effect == "deny" and "undefined" in decision.reason and decision.matched_rules == ("fail-closed",)


class FakeOpa:
    """An OPA Data API on loopback that evaluates the example Rego with regopy, or misbehaves on request."""

    def __init__(self) -> None:
        self.mode = "ok"
        self.tokens: list[str | None] = []
        interpreter = Interpreter()
        interpreter.add_module("policy", REGO.read_text())
        lock = threading.Lock()
        opa = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                opa.tokens.append(self.headers.get("Authorization"))
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                if opa.mode == "slow":
                    time.sleep(1.0)
                if opa.mode == "error":
                    return self._send(500, {"code": "internal_error"})
                if opa.mode == "undefined":
                    return self._send(200, {})
                with lock:
                    interpreter.set_input(body["input"])
                    result = interpreter.query("data." + self.path.removeprefix("/v1/data/").replace("/", "."))
                self._send(200, {"result": result.results[0].expressions[0]})
                return None

            def _send(self, status: int, payload: dict[str, Any]) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                with contextlib.suppress(BrokenPipeError):  # the client timed out first
                    self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"


@pytest.fixture(scope="module")
def opa() -> Iterator[FakeOpa]:
    server = FakeOpa()
    yield server
    server.server.shutdown()


def test_opa_decisions_match_the_json_backend_and_carry_the_token(opa: FakeOpa, monkeypatch: pytest.MonkeyPatch):
    opa.mode = "ok"
    monkeypatch.setenv("OPA_TOKEN_FOR_TEST", "opa-secret")
    policy = OpaPolicy(opa.url, QUERY_PATH, token_env="OPA_TOKEN_FOR_TEST", timeout=5)
    json_policy = JsonPolicy.load(JSON)
    for facts in [
        _facts(risk="high"),
        _facts(tenant_id="globex", reversibility="unknown"),
        _facts(phase="run", principal_type="agent"),
        _facts(phase="plan", saga_planned_nodes=40),
    ]:
        got, expected = policy.evaluate(facts), json_policy.evaluate(facts)
        assert (got.effect, got.matched_rules, got.budget) == (expected.effect, expected.matched_rules, expected.budget)
    assert set(opa.tokens) == {"Bearer opa-secret"}


@pytest.mark.parametrize(
    ("mode", "why"), [("slow", "did not answer"), ("error", "could not be asked"), ("undefined", "undefined")]
)
def test_opa_failures_fail_closed(opa: FakeOpa, mode: str, why: str):
    opa.mode = mode
    decision = OpaPolicy(opa.url, QUERY_PATH, token_env="", timeout=0.3).evaluate(_facts())
    assert decision.effect == "deny" and why in decision.reason and decision.backend == "opa"
    opa.mode = "ok"


def test_opa_sends_only_sanitized_facts(opa: FakeOpa):
    assert set(_facts().as_dict()) == {
        "tenant_id",
        "principal_id",
        "principal_type",
        "roles",
        "scopes",
        "phase",
        "action",
        "action_version",
        "action_kind",
        "domain",
        "operation",
        "resource",
        "risk",
        "reversibility",
        "saga_steps",
        "saga_planned_nodes",
        "saga_risk_units",
        "requested_parallel",
        "definition_changed",
    }
