"""A minimal MCP server over stdio written without the MCP SDK: plain JSON-RPC lines on stdin and stdout (issue 41).

It answers `initialize` (echoing the client's protocolVersion, capabilities `{"tools": {}}`), `ping`, `tools/list`
(two tools: `list_contacts`, a read by its name and `readOnlyHint`, and `create_contact`, a write) and `tools/call`
(a text content block holding a small JSON object, answered at once); it ignores every notification and answers
any other request with -32601. No validation, no tasks, no threads: its own cost per call is a `json.loads` and a
`json.dumps` (a few microseconds), so what a client measures against it is the transport and the client itself.

`python -m bench.raw_stdio_downstream` (as the stdio downstream of bench/proxy_latency.py).
"""

from __future__ import annotations

import contextlib
import json
import sys
from typing import Any

SERVER_INFO = {"name": "raw-stdio-downstream", "version": "1.0.0"}
FALLBACK_VERSION = "2025-11-25"

TOOLS: list[dict[str, Any]] = [
    {
        "name": "list_contacts",
        "description": "List the contacts (a fixed answer).",
        "inputSchema": {"type": "object", "properties": {}},
        "annotations": {"title": "List contacts", "readOnlyHint": True, "openWorldHint": False},
    },
    {
        "name": "create_contact",
        "description": "Create a contact (nothing is stored).",
        "inputSchema": {
            "type": "object",
            "properties": {"name": {"type": "string"}, "email": {"type": "string"}},
            "required": ["name"],
        },
        "annotations": {
            "title": "Create contact",
            "readOnlyHint": False,
            "destructiveHint": False,
            "idempotentHint": False,
            "openWorldHint": False,
        },
    },
]

CONTACTS = [{"id": "c-1", "name": "Ada Lovelace"}, {"id": "c-2", "name": "Grace Hopper"}]


def call_tool(params: dict[str, Any], counter: list[int]) -> dict[str, Any]:
    name = params.get("name")
    arguments = params.get("arguments") or {}
    if name == "list_contacts":
        payload: dict[str, Any] = {"contacts": CONTACTS}
    elif name == "create_contact":
        counter[0] += 1
        payload = {"id": f"c-new-{counter[0]}", "name": arguments.get("name", "")}
    else:
        return {"content": [{"type": "text", "text": f"unknown tool: {name}"}], "isError": True}
    return {"content": [{"type": "text", "text": json.dumps(payload, separators=(",", ":"))}], "isError": False}


def answer(message: dict[str, Any], counter: list[int]) -> dict[str, Any] | None:
    """The response to one message, or None for a notification (or a response the client sent)."""
    method = message.get("method")
    if "id" not in message or method is None:
        return None
    params = message.get("params") or {}
    if method == "initialize":
        result: dict[str, Any] = {
            "protocolVersion": params.get("protocolVersion") or FALLBACK_VERSION,
            "capabilities": {"tools": {}},
            "serverInfo": SERVER_INFO,
        }
    elif method == "ping":
        result = {}
    elif method == "tools/list":
        result = {"tools": TOOLS}
    elif method == "tools/call":
        result = call_tool(params, counter)
    else:
        error = {"code": -32601, "message": f"Method not found: {method}"}
        return {"jsonrpc": "2.0", "id": message["id"], "error": error}
    return {"jsonrpc": "2.0", "id": message["id"], "result": result}


def serve(stdin: Any = None, stdout: Any = None) -> None:
    stdin = stdin or sys.stdin.buffer
    stdout = stdout or sys.stdout.buffer
    counter = [0]
    for line in stdin:
        if not line.strip():
            continue
        try:
            message = json.loads(line)
        except ValueError:
            error = {"code": -32700, "message": "Parse error"}
            stdout.write(json.dumps({"jsonrpc": "2.0", "id": None, "error": error}).encode() + b"\n")
            stdout.flush()
            continue
        messages = message if isinstance(message, list) else [message]
        for one in messages:
            reply = answer(one, counter) if isinstance(one, dict) else None
            if reply is not None:
                stdout.write(json.dumps(reply, separators=(",", ":")).encode() + b"\n")
                stdout.flush()


def main() -> None:
    with contextlib.suppress(KeyboardInterrupt, BrokenPipeError):
        serve()


if __name__ == "__main__":
    main()
