"""A downstream MCP server without the SDK, answering the way many real ones do (text JSON, no structured output),
that records every JSON-RPC message it receives: the fast path's tests see exactly what reached it.

    python tests/proxy/plain_server.py --record FILE                  # stdio, JSON lines
    python tests/proxy/plain_server.py --record FILE --http-port N    # Streamable HTTP at /mcp, loopback

Over HTTP each POST is answered with one `application/json` body when its answer is the only message the server
sends for it, else as an event stream (the messages it sent first, then the answer); a notification gets 202,
DELETE 200, GET 405. Tools:

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
- `listed_structure(name)`: answers structuredContent that is a list (an object in 2025-11-25);
- `other_id(name)`: answers with an id that is not the call's (over HTTP, as the POST's one JSON body).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import threading
import time
from collections.abc import Callable
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
    _tool("other_id", {"name": "string"}),
]
_write_lock = threading.Lock()
Sink = Callable[[str], None]  # one JSON-RPC message as text, onto the wire


def _stdout(raw: str) -> None:
    with _write_lock:
        sys.stdout.write(raw + "\n")
        sys.stdout.flush()


_sink: Sink = _stdout
_local = threading.local()  # over HTTP, the sink of the request a thread answers


def send(message: dict[str, Any]) -> None:
    send_text(json.dumps(message))


def send_text(raw: str) -> None:
    getattr(_local, "sink", _sink)(raw)


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
        later = json.dumps({"jsonrpc": "2.0", "id": request_id, "result": text({"slow": True})})
        threading.Timer(0.5, getattr(_local, "sink", _sink), [later]).start()
    elif name == "lone_surrogate":
        raw = '{"jsonrpc": "2.0", "id": %s, "result": {"content": [{"type": "text", "text": "cut \\ud83d"}]}}'
        send_text(raw % json.dumps(request_id))
    elif name == "not_a_number":
        send({"jsonrpc": "2.0", "id": request_id, "result": {**text("nan"), "structuredContent": {"v": float("nan")}}})
    elif name == "bad_block":
        send({"jsonrpc": "2.0", "id": request_id, "result": {"content": [{"type": "text"}]}})
    elif name == "listed_structure":
        send({"jsonrpc": "2.0", "id": request_id, "result": {"content": [], "structuredContent": [1]}})
    elif name == "other_id":
        send({"jsonrpc": "2.0", "id": f"not-{request_id}", "result": text({"mine": False})})
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
    parser.add_argument("--http-port", type=int, default=0, help="serve Streamable HTTP on this port, not stdio")
    args = parser.parse_args()
    with open(args.record, "a", encoding="utf-8") as record:
        if args.http_port:
            import uvicorn

            uvicorn.run(_http_app(record), host="127.0.0.1", port=args.http_port, log_level="warning")
            return
        for line in sys.stdin:
            if not line.strip():
                continue
            message = json.loads(line)
            _record(record, message)
            answer(message)


def _record(record: Any, message: Any) -> None:
    with _write_lock:
        record.write(json.dumps({"at": time.time(), "message": message}) + "\n")
        record.flush()


def _http_app(record: Any) -> Any:
    async def app(scope: dict[str, Any], receive: Any, asgi_send: Any) -> None:
        if scope["type"] != "http":
            return
        if scope["method"] in ("DELETE", "GET"):
            await _reply(asgi_send, 200 if scope["method"] == "DELETE" else 405, "application/json", b"")
            return
        body = b""
        while True:
            part = await receive()
            body += part.get("body", b"")
            if not part.get("more_body"):
                break
        message = json.loads(body)
        _record(record, message)
        if not isinstance(message, dict) or "method" not in message or "id" not in message:
            await _reply(asgi_send, 202, "application/json", b"")
            return
        await _answer_over_http(message, asgi_send)

    return app


async def _answer_over_http(message: dict[str, Any], asgi_send: Any) -> None:
    loop = asyncio.get_running_loop()
    sent: asyncio.Queue[str] = asyncio.Queue()

    def answer_on_thread() -> None:
        _local.sink = lambda raw: loop.call_soon_threadsafe(sent.put_nowait, raw)
        answer(message)

    threading.Thread(target=answer_on_thread, daemon=True).start()
    first = await sent.get()
    if _is_answer(first):  # an answer first (to this request or, from other_id, to none): one JSON body
        await _reply(asgi_send, 200, "application/json", first.encode("utf-8", "surrogatepass"))
        return
    await asgi_send(
        {"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]}
    )
    raw = first
    while True:
        event = f"event: message\ndata: {raw}\n\n".encode("utf-8", "surrogatepass")
        await asgi_send({"type": "http.response.body", "body": event, "more_body": True})
        if _answers(raw, message["id"]):
            break
        raw = await sent.get()
    await asgi_send({"type": "http.response.body", "body": b""})


def _is_answer(raw: str) -> bool:
    return "method" not in json.loads(raw, parse_constant=lambda _: None)


def _answers(raw: str, request_id: Any) -> bool:
    answer = json.loads(raw, parse_constant=lambda _: None)
    return "method" not in answer and answer.get("id") == request_id


async def _reply(asgi_send: Any, status: int, kind: str, body: bytes) -> None:
    headers = [(b"content-type", kind.encode()), (b"mcp-session-id", b"plain-session")]
    await asgi_send({"type": "http.response.start", "status": status, "headers": headers})
    await asgi_send({"type": "http.response.body", "body": body})


if __name__ == "__main__":
    main()
