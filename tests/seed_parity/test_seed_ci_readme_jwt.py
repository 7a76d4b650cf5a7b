"""The seed's documented JWT deployment command (docs/enterprise_identity.md), bound to 127.0.0.1 instead of
0.0.0.0: every flag accepted as written, the metadata naming the identity provider and the public resource, and an
unauthenticated call challenged with a pointer to that metadata."""

from __future__ import annotations

from pathlib import Path

import httpx

from tests.seed_parity.seed_ci_harness import free_port, seed_server


def test_the_documented_jwt_command_line_serves_its_oauth_metadata(tmp_path: Path):
    port = free_port()
    flags = ["--transport", "streamable-http", "--host", "127.0.0.1", "--port", str(port)]
    flags += ["--allowed-host", "mcp.example.com", "--allowed-host", "mcp.example.com:*"]
    flags += ["--auth-mode", "jwt", "--auth-issuer", "https://idp.example.com/"]
    flags += ["--auth-resource-url", "https://mcp.example.com/mcp", "--auth-audience", "https://mcp.example.com"]
    flags += ["--auth-jwks-url", "https://idp.example.com/.well-known/jwks.json"]
    flags += ["--auth-required-scope", "semantic-saga", "--database", "./semantic-saga.db"]

    with seed_server("semantic-saga-mcp", flags, tmp_path, port) as server:
        public = {"Host": "mcp.example.com"}
        metadata = httpx.get(f"{server.base}/.well-known/oauth-protected-resource/mcp", headers=public, timeout=30)
        challenge = httpx.post(server.mcp_url, headers=public, timeout=30)

    assert metadata.status_code == 200, metadata.text
    body = metadata.json()
    assert body["authorization_servers"] == ["https://idp.example.com/"]
    assert body["resource"] == "https://mcp.example.com/mcp" and "semantic-saga" in body["scopes_supported"]
    assert challenge.status_code == 401
    pointer = 'resource_metadata="https://mcp.example.com/.well-known/oauth-protected-resource/mcp"'
    assert pointer in challenge.headers["www-authenticate"]
    assert (tmp_path / "semantic-saga.db").exists()  # the relative --database, from the directory it ran in
