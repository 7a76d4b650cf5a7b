"""A minimal MCP server over Streamable HTTP written without the MCP SDK (issue 41): the HTTP twin of
bench/raw_stdio_downstream.py, answering the same tools the same way.

One ASGI app under uvicorn at /mcp on 127.0.0.1: a POST of one JSON-RPC message is answered with one
`application/json` body (the spec lets a server answer a POST that way), `initialize` opens a session (its id in
the `mcp-session-id` header; any later request may carry it, none is checked), a notification or a response gets
202, GET gets 405 (no stream of its own) and DELETE 200. A bearer token is checked when `--token` is given. Its
own cost per call is a `json.loads` and a `json.dumps`, so what a client measures against it is HTTP, uvicorn and
the client itself.

`python -m bench.raw_http_downstream --port N [--token T]` (the HTTP downstream of bench/proxy_latency.py).
"""

from __future__ import annotations

import argparse
import json
import uuid
from typing import Any

from bench.raw_stdio_downstream import answer

PATH = "/mcp"
Scope = dict[str, Any]


def build_app(token: str | None) -> Any:
    counter = [0]
    session_id = uuid.uuid4().hex.encode()
    expected = f"Bearer {token}".encode() if token else None

    async def app(scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        headers = dict(scope["headers"])
        if scope["path"] != PATH:
            await _reply(send, 404, b"")
        elif expected is not None and headers.get(b"authorization") != expected:
            await _reply(send, 401, b"", [(b"www-authenticate", b"Bearer")])
        elif scope["method"] == "DELETE":
            await _reply(send, 200, b"")
        elif scope["method"] != "POST":
            await _reply(send, 405, b"", [(b"allow", b"POST, DELETE")])
        else:
            await _post(await _body(receive), send, counter, session_id)

    return app


async def _post(body: bytes, send: Any, counter: list[int], session_id: bytes) -> None:
    try:
        message = json.loads(body)
    except ValueError:
        error = {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "Parse error"}}
        await _reply(send, 400, json.dumps(error).encode())
        return
    reply = answer(message, counter) if isinstance(message, dict) else None
    extra = (
        [(b"mcp-session-id", session_id)] if isinstance(message, dict) and message.get("method") == "initialize" else []
    )
    if reply is None:
        await _reply(send, 202, b"", extra)
        return
    await _reply(send, 200, json.dumps(reply, separators=(",", ":")).encode(), extra)


async def _body(receive: Any) -> bytes:
    chunks = []
    while True:
        message = await receive()
        chunks.append(message.get("body", b""))
        if not message.get("more_body"):
            return b"".join(chunks)


async def _reply(send: Any, status: int, body: bytes, headers: list[tuple[bytes, bytes]] | None = None) -> None:
    start = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()), *(headers or [])]
    await send({"type": "http.response.start", "status": status, "headers": start})
    await send({"type": "http.response.body", "body": body})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--token", default=None, help="the bearer token every request must carry")
    args = parser.parse_args()
    import uvicorn

    uvicorn.run(build_app(args.token), host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
