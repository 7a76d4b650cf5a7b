"""semantic-saga-mcp's "OAuth tenant, RBAC, and audit smoke" job against our `semantic-saga-mcp`, with the job's own
token file (the seed's format, 12 to 14 character tokens) and flags: the bearer gate, the protected-resource
metadata naming the issuer, a same-tenant hand-off, a viewer refused a commit, another tenant refused the saga.
Written from the job's steps (.github/workflows/ci.yml); the tokens and claims are the job's."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx

from tests.seed_parity.seed_ci_harness import bearer_client, free_port, seed_server

ISSUER = "https://auth.example.com"
# The job's file: token -> client, subject, the base scope, and tenant/roles/type as claims.
SEED_TOKENS = {
    "operator-token": {"client": "agent-client", "subject": "alice", "tenant": "acme", "role": "operator"},
    "viewer-token": {"client": "viewer-client", "subject": "bob", "tenant": "acme", "role": "viewer"},
    "outsider-token": {"client": "other-client", "subject": "mallory", "tenant": "other", "role": "operator"},
}


def seed_token_file(path: Path) -> Path:
    document = {
        token: {
            "client_id": who["client"],
            "subject": who["subject"],
            "scopes": ["semantic-saga"],
            "claims": {"tenant_id": who["tenant"], "roles": [who["role"]], "principal_type": "user"},
        }
        for token, who in SEED_TOKENS.items()
    }
    path.write_text(json.dumps(document), encoding="utf-8")
    return path


def auth_flags(tmp_path: Path, port: int) -> list[str]:
    flags = ["--transport", "streamable-http", "--host", "127.0.0.1", "--port", str(port)]
    flags += ["--database", str(tmp_path / "semantic-saga-auth.db")]
    flags += ["--auth-mode", "static", "--auth-static-tokens", str(seed_token_file(tmp_path / "tokens.json"))]
    flags += ["--auth-issuer", ISSUER, "--auth-resource-url", f"http://127.0.0.1:{port}/mcp"]
    return [*flags, "--auth-required-scope", "semantic-saga"]


def test_bearer_gate_metadata_handoff_rbac_and_tenant_isolation(tmp_path: Path):
    port = free_port()
    with seed_server("semantic-saga-mcp", auth_flags(tmp_path, port), tmp_path, port) as server:
        # the bearer gate and the metadata, as the job checks them with curl
        unauthenticated = httpx.post(server.mcp_url, timeout=30)
        metadata = httpx.get(f"{server.base}/.well-known/oauth-protected-resource/mcp", timeout=30)
        results = asyncio.run(_clients(server.mcp_url))
        log = server.output()

    assert unauthenticated.status_code == 401
    assert metadata.status_code == 200 and f"{ISSUER}/" in metadata.text, metadata.text
    assert metadata.json()["resource"] == f"http://127.0.0.1:{port}/mcp"
    # a same-tenant viewer reads the operator's saga and its timeline but may not commit it
    assert not results["viewer_get"].is_error, results["viewer_get"]
    assert not results["viewer_timeline"].is_error, results["viewer_timeline"]
    assert results["viewer_commit"].is_error
    # another tenant is told the saga does not exist
    hidden = results["outsider_timeline"]
    assert hidden.is_error and "Saga not found" in hidden.content[0].text, hidden.content[0].text
    # ours, beyond the job: the short tokens were accepted on loopback with a warning that says so
    assert "WARNING: 3 static token(s) shorter than 16 characters" in log, log


async def _clients(url: str) -> dict[str, Any]:
    results: dict[str, Any] = {}
    async with bearer_client(url, "operator-token") as operator:
        created = await operator.call_tool("begin_saga", {"metadata": {"case": "phase7"}})
        assert not created.is_error, created
        saga_id = created.structured_content["id"]
    async with bearer_client(url, "viewer-token") as viewer:
        results["viewer_get"] = await viewer.call_tool("get_saga", {"saga_id": saga_id})
        results["viewer_timeline"] = await viewer.call_tool("get_saga_timeline", {"saga_id": saga_id})
        results["viewer_commit"] = await viewer.call_tool("commit_saga", {"saga_id": saga_id})
    async with bearer_client(url, "outsider-token") as outsider:
        results["outsider_timeline"] = await outsider.call_tool("get_saga_timeline", {"saga_id": saga_id})
    return results
