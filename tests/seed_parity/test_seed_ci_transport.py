"""semantic-saga-mcp's "MCP 2026 transport smoke" job against our `semantic-saga-mcp`: Streamable HTTP on a fresh
SQLite file, two separate clients negotiating 2026-07-28, the second reaching the first one's saga by its id, and
the saga's audit chain verifying. Written from the job's steps (.github/workflows/ci.yml, both stored versions)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from mcp import Client

from tests.seed_parity.seed_ci_harness import free_port, seed_server

MODERN = "2026-07-28"


def test_streamable_http_is_modern_and_a_saga_outlives_the_client_that_began_it(tmp_path: Path):
    # given the job's command line: Streamable HTTP on 127.0.0.1 with a SQLite file
    port = free_port()
    flags = ["--transport", "streamable-http", "--host", "127.0.0.1", "--port", str(port)]
    flags += ["--database", str(tmp_path / "semantic-saga.db")]

    with seed_server("semantic-saga-mcp", flags, tmp_path, port) as server:
        # when one client begins a saga and a brand-new client asks for it and for its audit chain
        async def scenario() -> tuple[str | None, str | None, dict, dict, dict]:
            async with Client(server.mcp_url) as first:
                first_version = first.protocol_version
                created = await first.call_tool("begin_saga", {"metadata": {"smoke": True}})
                assert not created.is_error, created
                saga_id = created.structured_content["id"]
            async with Client(server.mcp_url) as second:
                second_version = second.protocol_version
                fetched = await second.call_tool("get_saga", {"saga_id": saga_id})
                assert not fetched.is_error, fetched
                integrity = await second.call_tool("verify_audit_chain", {"saga_id": saga_id})
                assert not integrity.is_error, integrity
            found, checked = fetched.structured_content or {}, integrity.structured_content or {}
            return first_version, second_version, {"id": saga_id}, found, checked

        first_version, second_version, created, fetched, integrity = asyncio.run(scenario())

    # then both sessions are modern, the second reached the same ACTIVE saga, and its chain verifies
    assert first_version == MODERN and second_version == MODERN
    assert fetched["id"] == created["id"]
    assert fetched["status"] == "ACTIVE", fetched
    assert integrity["valid"] is True, integrity
