"""The `opa` backend: an OPA server's Data API, asked over HTTP for every decision (fails closed)."""

from __future__ import annotations

import os

import httpx

from governance.policy.as_code import PolicyAsCode
from governance.policy.facts import Decision, PolicyInput, decision_from_result, fail_closed


class OpaPolicy(PolicyAsCode):
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
