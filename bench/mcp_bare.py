"""The MCP reference server: a bare `MCPServer`, bearer-checked by the SDK, under uvicorn (or over stdio).

Run: python -m bench.mcp_bare --port 8765 --token TOKEN [--database URL] (loopback only), or
python -m bench.mcp_bare --stdio (a downstream for the stdio proxy: no token, no database). Same transport
settings as our /mcp: Streamable HTTP, stateful sessions, SSE responses, DNS-rebinding protection for loopback hosts.

Tools: `noop` (does nothing); `get_status` (a read by readOnlyHint, no database); with --database
(sqlite:///path or postgresql://...), `read_row` (one SELECT by primary key) and `write_row` (one INSERT and
COMMIT): the shape of semantic-saga-mcp, whose every tool call is one write on its SQLite or PostgreSQL database.
SQLite gets the pragmas our settings give Django (WAL, synchronous=NORMAL); each worker thread keeps one
connection.
"""

from __future__ import annotations

import argparse
import hashlib
import hmac
import json
import threading
from typing import Any

from mcp.server.auth.provider import AccessToken
from mcp.server.auth.settings import AuthSettings
from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations
from pydantic import AnyHttpUrl

TABLE = "bench_bare_mcp"


class StaticVerifier:
    def __init__(self, token: str) -> None:
        self._digest = hashlib.sha256(token.encode()).digest()

    async def verify_token(self, token: str) -> AccessToken | None:
        if hmac.compare_digest(hashlib.sha256(token.encode()).digest(), self._digest):
            return AccessToken(token=token, client_id="bench", scopes=[])
        return None


class Store:
    """One connection per thread on SQLite or PostgreSQL; `read` is one SELECT, `write` one INSERT + COMMIT."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.sqlite = url.startswith("sqlite:///")
        self.local = threading.local()
        mark = "?" if self.sqlite else "%s"
        self.select = f"SELECT payload FROM {TABLE} WHERE id = {mark}"
        self.insert = f"INSERT INTO {TABLE} (saga, payload) VALUES ({mark}, {mark})"
        key = "INTEGER PRIMARY KEY AUTOINCREMENT" if self.sqlite else "BIGSERIAL PRIMARY KEY"
        conn = self._connection()
        conn.execute(f"CREATE TABLE IF NOT EXISTS {TABLE} (id {key}, saga TEXT NOT NULL, payload TEXT NOT NULL)")
        conn.execute(self.insert, ("seed", "{}"))
        conn.commit()

    def _connection(self) -> Any:
        conn = getattr(self.local, "conn", None)
        if conn is None:
            if self.sqlite:
                import sqlite3

                conn = sqlite3.connect(self.url.removeprefix("sqlite:///"), check_same_thread=False, timeout=30)
                conn.execute("PRAGMA journal_mode=WAL")
                conn.execute("PRAGMA synchronous=NORMAL")
            else:
                import psycopg

                conn = psycopg.connect(self.url)
            self.local.conn = conn
        return conn

    def read(self, row_id: int) -> dict[str, Any]:
        conn = self._connection()
        row = conn.execute(self.select, (row_id,)).fetchone()
        conn.commit()  # ends the read transaction (psycopg opens one)
        return {"id": row_id, "payload": json.loads(row[0]) if row else None}

    def write(self, saga: str, payload: dict[str, Any]) -> dict[str, Any]:
        conn = self._connection()
        conn.execute(self.insert, (saga, json.dumps(payload)))
        conn.commit()
        return {"saga": saga, "written": True}


def server(token: str | None, database: str | None) -> MCPServer:
    auth: dict[str, Any] = {}
    if token is not None:
        auth = {
            "token_verifier": StaticVerifier(token),
            "auth": AuthSettings(issuer_url=AnyHttpUrl("http://127.0.0.1"), resource_server_url=None),
        }
    mcp = MCPServer("bench-bare", **auth)

    @mcp.tool(name="noop")
    def noop(saga_id: str = "", action: str = "", input: dict[str, Any] | None = None) -> dict[str, Any]:
        """Does nothing; answers an empty object."""
        return {}

    @mcp.tool(name="get_status", annotations=ToolAnnotations(read_only_hint=True))
    def get_status() -> dict[str, Any]:
        """A read: answers a constant status (the proxy classifies it read from readOnlyHint)."""
        return {"status": "ok"}

    if database:
        store = Store(database)

        @mcp.tool(name="read_row")
        def read_row(row_id: int = 1) -> dict[str, Any]:
            """One SELECT by primary key."""
            return store.read(row_id)

        @mcp.tool(name="write_row")
        def write_row(saga_id: str = "", action: str = "", input: dict[str, Any] | None = None) -> dict[str, Any]:
            """One INSERT and COMMIT."""
            return store.write(saga_id, {"action": action, "input": input or {}})

    return mcp


def build(token: str, database: str | None = None) -> Any:
    return server(token, database).streamable_http_app(
        streamable_http_path="/mcp", stateless_http=False, json_response=False
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int)
    parser.add_argument("--token")
    parser.add_argument("--database", help="sqlite:///path or postgresql://...: adds read_row and write_row")
    parser.add_argument("--stdio", action="store_true", help="serve over stdio (no token)")
    args = parser.parse_args()
    if args.stdio:
        server(None, args.database).run(transport="stdio")
        return
    if args.port is None or args.token is None:
        parser.error("--port and --token are required over HTTP")
    import uvicorn

    uvicorn.run(build(args.token, args.database), host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
