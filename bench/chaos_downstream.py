"""The chaos suite's downstream MCP server: what the proxied sagas act on, recording every call it receives.

    python -m bench.chaos_downstream --port 8940 --record calls.jsonl     # Streamable HTTP at /mcp, loopback

Tools: `chaos_put` (stores a value under a name; a pack declares `chaos_delete` its inverse, so the proxy classes
it R), `chaos_delete` (the inverse), `chaos_get` (readOnlyHint: a read) and `chaos_hold` (the proxy's config holds
every call of it for a person, who never comes: the fault injector kills the proxy holding it, so it must never
arrive here). Each call is appended to the record
(tool, idempotency key from `_meta`, arguments) and flushed before it takes effect, so the record is the world's
own account of what reached it, whatever happens to the proxy afterwards. Each answer is held back a little
(`--max-delay`), so a proxy killed by the fault injector is often killed while a call is out.

The notification flood fault (bench/chaos_faults.py) arms it over `POST /flood` (loopback, bounded): during each of
its next `calls` calls, before answering, it sends the proxy at most `count` notifications (log messages, progress,
list_changed, resources/updated and a method nobody knows, in turn) for at most `seconds`, as fast as the stream takes
them; `GET /flood` says how many it sent in all. The proxy must drop what is past its rate and keep serving.
"""

from __future__ import annotations

import argparse
import json
import random
import threading
import time
from pathlib import Path
from typing import Any

import anyio
import mcp.types as types
from mcp.server import Server, ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp.types import INVALID_PARAMS
from starlette.requests import Request
from starlette.responses import JSONResponse

IDEMPOTENCY_META_KEY = "io.semantic-saga/idempotency_key"  # what the proxy and kind: mcp actions send


def _tool(tool: str, description: str, fields: dict[str, str], read_only: bool = False) -> types.Tool:
    properties = {field: {"type": kind} for field, kind in fields.items()}
    annotations = types.ToolAnnotations(read_only_hint=True) if read_only else None
    schema = {"type": "object", "properties": properties, "required": list(fields)}
    return types.Tool(name=tool, description=description, input_schema=schema, annotations=annotations)


TOOLS = [
    _tool("chaos_put", "Store a value under a name.", {"name": "string", "value": "string"}),
    _tool("chaos_delete", "Forget the value stored under a name.", {"name": "string"}),
    _tool("chaos_get", "Read the value stored under a name.", {"name": "string"}, read_only=True),
    _tool("chaos_hold", "Store a value once a person approved it.", {"name": "string"}),
]
# The proxy's configuration beside the pack: chaos_hold always waits for a person, for as long as a run lasts.
HELD = {"tools": [{"tool": "chaos_hold", "action": "confirm", "reason": "the held-call fault's tool"}]}
HELD_TIMEOUT_MS = 3_600_000
# The most one armed flood may ask for: calls flooded, notifications per call, seconds per call.
FLOOD_LIMITS = {"calls": 10, "count": 20_000, "seconds": 5.0}
PACK = {
    "name": "chaos",
    "description": "The chaos downstream's inverse: a put is undone by deleting what it stored.",
    "entries": [{"tool": "chaos_put", "inverse": {"tool": "chaos_delete", "args": {"name": "$.args.name"}}}],
}


class World:
    def __init__(self, record: Path, max_delay: float) -> None:
        self.record = record.open("a", encoding="utf-8")
        self.max_delay = max_delay
        self.values: dict[str, str] = {}
        self.lock = threading.Lock()
        self.flood = {"calls": 0, "count": 0, "seconds": 0.0}  # what the next calls send (calls left)
        self.flooded = 0  # notifications sent by floods, in all

    def note(self, tool: str, key: str, args: dict[str, Any]) -> None:
        line = json.dumps({"tool": tool, "key": key, "args": args, "at": round(time.time(), 3)}, sort_keys=True)
        with self.lock:
            self.record.write(line + "\n")
            self.record.flush()


def _key(params: types.CallToolRequestParams) -> str:
    meta = params.meta if isinstance(params.meta, dict) else getattr(params.meta, "model_extra", None)
    return str((meta or {}).get(IDEMPOTENCY_META_KEY, ""))


def build_server(world: World) -> Server[Any]:
    async def list_tools(ctx: ServerRequestContext[Any], params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=TOOLS)

    async def call_tool(ctx: ServerRequestContext[Any], params: types.CallToolRequestParams) -> types.CallToolResult:
        args = dict(params.arguments or {})
        if params.name not in {tool.name for tool in TOOLS}:
            raise MCPError(INVALID_PARAMS, f"Unknown tool {params.name!r}; this server has {[t.name for t in TOOLS]}")
        world.note(params.name, _key(params), args)
        name = str(args.get("name", ""))
        if params.name == "chaos_put":
            world.values[name] = str(args.get("value", ""))
        elif params.name == "chaos_delete":
            world.values.pop(name, None)
        answer = {"name": name, "value": world.values.get(name)}
        if world.flood["calls"] > 0:
            world.flood["calls"] -= 1
            world.flooded += await _flood(ctx, int(world.flood["count"]), float(world.flood["seconds"]))
        await anyio.sleep(random.uniform(0, world.max_delay))  # the answer is on its way: a kill now loses it
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=json.dumps(answer))], structured_content=answer
        )

    return Server("chaos-downstream", version="1.0.0", on_list_tools=list_tools, on_call_tool=call_tool)


async def _flood(ctx: ServerRequestContext[Any], count: int, seconds: float) -> int:
    """Notifications on the call's own stream, every kind in turn, until `count` were sent or `seconds` passed."""
    # The request's private channel: a method nobody knows has no typed send in the SDK.
    outbound = ctx.session._request_outbound
    kinds = [
        ("notifications/message", {"level": "info", "logger": "chaos-flood", "data": "flood"}),
        ("notifications/progress", {"progressToken": ctx.request_id, "progress": 1}),
        ("notifications/tools/list_changed", None),
        ("notifications/resources/updated", {"uri": "file:///chaos/flood"}),
        ("notifications/chaos/noise", {"padding": "x" * 64}),
    ]
    sent, deadline = 0, anyio.current_time() + seconds
    while sent < count and anyio.current_time() < deadline:
        method, params = kinds[sent % len(kinds)]
        await outbound.notify(method, params)
        sent += 1
    return sent


def flood_endpoint(world: World) -> Any:
    """POST {"calls", "count", "seconds"} arms the next calls' flood (each clamped to FLOOD_LIMITS); GET (and the
    POST's answer) says how many notifications floods sent in all."""

    async def endpoint(request: Request) -> JSONResponse:
        if request.method == "POST":
            asked = await request.json()
            for key, limit in FLOOD_LIMITS.items():
                world.flood[key] = type(limit)(min(max(asked.get(key, 0), 0), limit))
        return JSONResponse({"flooded": world.flooded, "armed_calls": world.flood["calls"]})

    return endpoint


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--record", required=True, help="append every call here (JSON lines)")
    parser.add_argument("--max-delay", type=float, default=0.3, help="longest pause before an answer (seconds)")
    args = parser.parse_args()
    import uvicorn

    world = World(Path(args.record), args.max_delay)
    app = build_server(world).streamable_http_app(streamable_http_path="/mcp")
    app.add_route("/flood", flood_endpoint(world), methods=["GET", "POST"])
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
