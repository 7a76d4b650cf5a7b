"""Trace context: an agent's trace id reaches the audit trail, the executor and the downstream HTTP request."""

from __future__ import annotations

import asyncio
from typing import Any

from audit import telemetry
from audit.models import AuditEvent
from tests.contracts import http_contract, register
from tests.httpserver import RecordingHTTPServer
from tests.protocols.conftest import ALICE, RunningServer
from tests.protocols.mcp_client import connect

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
TRACEPARENT = f"00-{TRACE_ID}-00f067aa0ba902b7-01"
MARKER = "PLANTED-INPUT-VALUE-7f3e"


def _trace_of(header: str) -> str:
    return header.split("-")[1]


def _in_our_trace(scenario: Any) -> str:
    # The MCP client may trace its own calls (when an OpenTelemetry SDK is installed in this process) and then
    # sends its span's context: run it inside our trace, so either way the server receives our trace id.
    with telemetry.attached({"traceparent": TRACEPARENT}):
        return str(asyncio.run(scenario()))


def test_mcp_meta_trace_reaches_audit_and_the_downstream_request(
    server: RunningServer, downstream: RecordingHTTPServer
):
    register(http_contract("charge", downstream.url))

    async def scenario() -> str:
        async with connect(server.mcp_url, ALICE, "auto") as client:
            meta: Any = {"traceparent": TRACEPARENT}
            begun = await client.call_tool("begin_saga", {}, meta=meta)
            sid = begun.structured_content["id"]  # type: ignore[index]
            await client.call_tool(
                "plan_saga_step", {"saga_id": sid, "action": "charge", "input": {"card": MARKER}}, meta=meta
            )
            await client.call_tool("run_ready_steps", {"saga_id": sid}, meta=meta)
            return str(sid)

    saga_id = _in_our_trace(scenario)
    # the executor's request to the downstream service continues the agent's trace
    [request] = downstream.requests_to("/charge")
    assert _trace_of(request[2]["traceparent"]) == TRACE_ID
    # every audit event of the run, including the ones the executor thread wrote, carries it
    events = list(AuditEvent.objects.filter(saga_id=saga_id))
    assert {e.trace_id for e in events} == {TRACE_ID}
    assert all(e.span_id for e in events)
    # and no audit row holds the input value
    assert all(MARKER not in str(e.data) for e in events)


def test_http_traceparent_header_is_the_fallback(server: RunningServer):
    async def scenario() -> str:
        import httpx2
        from mcp import Client
        from mcp.client.streamable_http import streamable_http_client

        headers = {"Authorization": f"Bearer {ALICE}", "traceparent": TRACEPARENT}
        async with (
            httpx2.AsyncClient(headers=headers, timeout=30) as http,
            Client(streamable_http_client(server.mcp_url, http_client=http), mode="auto") as client,
        ):
            result = await client.call_tool("begin_saga", {})
            return str(result.structured_content["id"])  # type: ignore[index]

    saga_id = _in_our_trace(scenario)
    assert AuditEvent.objects.get(saga_id=saga_id).trace_id == TRACE_ID
