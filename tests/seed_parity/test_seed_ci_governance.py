"""semantic-saga-mcp's "Tenant policy, approval, budget, and decision audit smoke" job against our
`semantic-saga-mcp`, with the job's token file (the seed's format), its JSON policy (revision ci-policy-7, approval
at low risk and above, one node at a time) and its flags: a planned create_text_file waits for approval, a run asking
for two parallel nodes is refused by the parallelism budget, one at a time runs, the decisions carry the revision,
a viewer reads status and decisions, another tenant is told the saga does not exist. Written from the job's steps
(.github/workflows/ci.yml)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from tests.seed_parity.seed_ci_harness import bearer_client, free_port, seed_policy, seed_server
from tests.seed_parity.test_seed_ci_auth import ISSUER

REVISION = "ci-policy-7"
TOKENS = {
    "operator-token": ("agent-client", "alice", "acme", "operator"),
    "viewer-token": ("viewer-client", "bob", "acme", "viewer"),
    "outsider-token": ("other-client", "mallory", "other", "viewer"),
}
POLICY = seed_policy(REVISION)


def governance_flags(tmp_path: Path, port: int) -> list[str]:
    tokens = {
        token: {
            "client_id": client,
            "subject": subject,
            "scopes": ["semantic-saga"],
            "claims": {"tenant_id": tenant, "roles": [role], "principal_type": "user"},
        }
        for token, (client, subject, tenant, role) in TOKENS.items()
    }
    (tmp_path / "governance-tokens.json").write_text(json.dumps(tokens), encoding="utf-8")
    (tmp_path / "governance-policy.json").write_text(json.dumps(POLICY), encoding="utf-8")
    flags = ["--transport", "streamable-http", "--host", "127.0.0.1", "--port", str(port)]
    flags += ["--database", str(tmp_path / "semantic-saga-governance.db"), "--file-root", str(tmp_path / "saga-files")]
    flags += ["--policy-mode", "json", "--policy-file", str(tmp_path / "governance-policy.json")]
    flags += ["--auth-mode", "static", "--auth-static-tokens", str(tmp_path / "governance-tokens.json")]
    flags += ["--auth-issuer", ISSUER, "--auth-resource-url", f"http://127.0.0.1:{port}/mcp"]
    return [*flags, "--auth-required-scope", "semantic-saga"]


def test_governed_plan_approval_budget_and_decision_audit(tmp_path: Path):
    port = free_port()
    with seed_server("semantic-saga-mcp", governance_flags(tmp_path, port), tmp_path, port) as server:
        seen = asyncio.run(_scenario(server.mcp_url))

    planned, denied = seen["planned"], seen["denied"]
    assert not planned.is_error and planned.structured_content["status"] == "WAITING_APPROVAL", planned
    assert not seen["approved"].is_error, seen["approved"]
    assert denied.is_error and "parallelism budget" in denied.content[0].text, denied.content[0].text
    assert not seen["ran"].is_error, seen["ran"]
    decisions = seen["decisions"]
    assert not decisions.is_error, decisions
    assert any(
        e["data"].get("revision") == REVISION
        for e in decisions.structured_content["events"]
        if e["event_type"] == "POLICY_DECISION"
    ), decisions.structured_content
    status = seen["viewer_status"]
    assert not status.is_error and status.structured_content["revision"] == REVISION, status
    assert not seen["viewer_decisions"].is_error, seen["viewer_decisions"]
    hidden = seen["outsider_decisions"]
    assert hidden.is_error and "Saga not found" in hidden.content[0].text, hidden.content[0].text
    assert (tmp_path / "saga-files" / "ci.txt").read_text() == "governed"


async def _scenario(url: str) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    async with bearer_client(url, "operator-token") as operator:
        created = await operator.call_tool("begin_saga", {})
        assert not created.is_error, created
        saga_id = created.structured_content["id"]
        step = {"path": "ci.txt", "content": "governed"}
        planned = await operator.call_tool(
            "plan_saga_step", {"saga_id": saga_id, "action": "create_text_file", "input": step}
        )
        seen["planned"] = planned
        assert not planned.is_error, planned
        node = {"saga_id": saga_id, "node_id": planned.structured_content["id"]}
        seen["approved"] = await operator.call_tool("approve_saga_step", {**node, "approved": True, "reason": "ci"})
        seen["denied"] = await operator.call_tool("run_ready_steps", {"saga_id": saga_id, "max_parallel": 2})
        seen["ran"] = await operator.call_tool("run_ready_steps", {"saga_id": saga_id, "max_parallel": 1})
        seen["decisions"] = await operator.call_tool("get_policy_decisions", {"saga_id": saga_id})
    async with bearer_client(url, "viewer-token") as viewer:
        seen["viewer_status"] = await viewer.call_tool("get_policy_status", {})
        seen["viewer_decisions"] = await viewer.call_tool("get_policy_decisions", {"saga_id": saga_id})
    async with bearer_client(url, "outsider-token") as outsider:
        seen["outsider_decisions"] = await outsider.call_tool("get_policy_decisions", {"saga_id": saga_id})
    return seen
