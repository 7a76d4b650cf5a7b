"""The MCP reference server: a bare `MCPServer` with one no-op tool, bearer-checked by the SDK, under uvicorn.

Run: python -m bench.mcp_bare --port 8765 --token TOKEN (loopback only). Same transport settings as our /mcp:
Streamable HTTP, stateful sessions, SSE responses, DNS-rebinding protection for loopback hosts.
"""

from __future__ import annotations

import argparse
import hashlib
import hmac
from typing import Any

import uvicorn
from mcp.server.auth.provider import AccessToken
from mcp.server.auth.settings import AuthSettings
from mcp.server.mcpserver import MCPServer
from pydantic import AnyHttpUrl


class StaticVerifier:
    def __init__(self, token: str) -> None:
        self._digest = hashlib.sha256(token.encode()).digest()

    async def verify_token(self, token: str) -> AccessToken | None:
        if hmac.compare_digest(hashlib.sha256(token.encode()).digest(), self._digest):
            return AccessToken(token=token, client_id="bench", scopes=[])
        return None


def build(token: str) -> Any:
    server = MCPServer(
        "bench-bare",
        token_verifier=StaticVerifier(token),
        auth=AuthSettings(issuer_url=AnyHttpUrl("http://127.0.0.1"), resource_server_url=None),
    )

    @server.tool(name="noop")
    def noop(saga_id: str = "", action: str = "", input: dict[str, Any] | None = None) -> dict[str, Any]:
        """Does nothing; answers an empty object."""
        return {}

    return server.streamable_http_app(streamable_http_path="/mcp", stateless_http=False, json_response=False)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--token", required=True)
    args = parser.parse_args()
    uvicorn.run(build(args.token), host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
