"""A downstream MCP server without the SDK, answering the way many real ones do (text JSON, no structured output),
that records every JSON-RPC message it receives: the fast path's tests see exactly what reached it.

    python tests/proxy/plain_server.py --record FILE

Over stdio, JSON lines. Tools:

- `lookup(key)`: a read (readOnlyHint), answers `{"key": key, "found": true}` with an extra top-level field
  (`x-served-by`) that only a proxy relaying the answer as it came passes on;
- `create_item(name)`: a write (no annotations, class unknown: gate allow by default);
- `noisy(name)`: sends a notifications/message (info) before it answers;
- `rpc_error(name, code?)`: answers a JSON-RPC error (`code`, default -32050, "the plain server refuses this");
- `bad_result(name)`: answers a result that is not a tools/call result (`content` a string);
- `huge(kilobytes)`: answers that many KB of text;
- `hang(name)`: never answers (until cancelled: it records the notifications/cancelled);
- `slow(name)`: answers after 0.5 s;
- `lone_surrogate(name)`: answers text ending in half an emoji (a lone UTF-16 surrogate, as a careless encoder
  writes it: valid JSON no UTF-8 text can carry);
- `not_a_number(name)`: answers structuredContent `{"v": NaN}` (Python's json writes it; it is not JSON);
- `bad_block(name)`: answers a text block without its text;
- `listed_structure(name)`: answers structuredContent that is a list (an object in 2025-11-25).
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from typing import Any

PROTOCOL = "2025-11-25"


def _tool(name: str, properties: dict[str, str], **annotations: Any) -> dict[str, Any]:
    tool: dict[str, Any] = {
        "name": name,
        "description": f"The plain server's {name}.",
        "inputSchema": {
            "type": "object",
            "properties": {key: {"type": kind} for key, kind in properties.items()},
            "required": list(properties),
        },
    }
    if annotations:
        tool["annotations"] = annotations
    return tool


TOOLS = [
    _tool("lookup", {"key": "string"}, readOnlyHint=True),
    _tool("create_item", {"name": "string"}),
    _tool("noisy", {"name": "string"}),
    _tool("rpc_error", {"name": "string"}),
    _tool("bad_result", {"name": "string"}),
    _tool("huge", {"kilobytes": "integer"}),
    _tool("hang", {"name": "string"}),
    _tool("slow", {"name": "string"}),
    _tool("lone_surrogate", {"name": "string"}),
    _tool("not_a_number", {"name": "string"}),
    _tool("bad_block", {"name": "string"}),
    _tool("listed_structure", {"name": "string"}),
]
_write_lock = threading.Lock()


def send(message: dict[str, Any]) -> None:
    with _write_lock:
        sys.stdout.write(json.dumps(message) + "\n")
        sys.stdout.flush()


def text(value: Any) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": json.dumps(value)}]}


def call(request_id: Any, params: dict[str, Any]) -> None:
    name, arguments = params.get("name"), params.get("arguments") or {}
    if name == "lookup":
        send(
            {
                "jsonrpc": "2.0",
                "id": request_id,
                "result": {**text({"key": arguments.get("key"), "found": True}), "x-served-by": "plain"},
            }
        )
    elif name == "create_item":
        send({"jsonrpc": "2.0", "id": request_id, "result": text({"created": arguments.get("name")})})
    elif name == "noisy":
        note = {"level": "info", "logger": "plain", "data": f"working on {arguments.get('name')}"}
        send({"jsonrpc": "2.0", "method": "notifications/message", "params": note})
        send({"jsonrpc": "2.0", "id": request_id, "result": text({"noisy": True})})
    elif name == "rpc_error":
        code = int(arguments.get("code") or -32050)
        send({"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": "the plain server refuses this"}})
    elif name == "bad_result":
        send({"jsonrpc": "2.0", "id": request_id, "result": {"content": "not a list"}})
    elif name == "huge":
        send({"jsonrpc": "2.0", "id": request_id, "result": text("x" * (int(arguments["kilobytes"]) * 1024))})
    elif name == "slow":
        threading.Timer(0.5, send, [{"jsonrpc": "2.0", "id": request_id, "result": text({"slow": True})}]).start()
    elif name == "lone_surrogate":
        raw = '{"jsonrpc": "2.0", "id": %s, "result": {"content": [{"type": "text", "text": "cut \\ud83d"}]}}'
        with _write_lock:
            sys.stdout.write(raw % json.dumps(request_id) + "\n")
            sys.stdout.flush()
    elif name == "not_a_number":
        send({"jsonrpc": "2.0", "id": request_id, "result": {**text("nan"), "structuredContent": {"v": float("nan")}}})
    elif name == "bad_block":
        send({"jsonrpc": "2.0", "id": request_id, "result": {"content": [{"type": "text"}]}})
    elif name == "listed_structure":
        send({"jsonrpc": "2.0", "id": request_id, "result": {"content": [], "structuredContent": [1]}})
    elif name != "hang":
        send({"jsonrpc": "2.0", "id": request_id, "error": {"code": -32602, "message": f"Unknown tool {name!r}"}})


def answer(message: dict[str, Any]) -> None:
    method, request_id = message.get("method"), message.get("id")
    if method == "initialize":
        result = {
            "protocolVersion": PROTOCOL,
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "plain-server", "version": "1.0.0"},
        }
        send({"jsonrpc": "2.0", "id": request_id, "result": result})
    elif method == "tools/list":
        send({"jsonrpc": "2.0", "id": request_id, "result": {"tools": TOOLS}})
    elif method == "ping":
        send({"jsonrpc": "2.0", "id": request_id, "result": {}})
    elif method == "tools/call":
        call(request_id, message.get("params") or {})
    elif request_id is not None and "method" in message:
        send({"jsonrpc": "2.0", "id": request_id, "error": {"code": -32601, "message": f"no method {method}"}})


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--record", required=True)
    args = parser.parse_args()
    with open(args.record, "a", encoding="utf-8") as record:
        for line in sys.stdin:
            if not line.strip():
                continue
            message = json.loads(line)
            record.write(json.dumps({"at": time.time(), "message": message}) + "\n")
            record.flush()
            answer(message)


if __name__ == "__main__":
    main()
