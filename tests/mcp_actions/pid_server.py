"""A downstream MCP server that says which process answered: the shared-connection tests count server starts.

    python tests/mcp_actions/pid_server.py --pid-file started.txt                    # stdio
    python tests/mcp_actions/pid_server.py --pid-file started.txt --http --port 8933  # Streamable HTTP at /mcp

On start it appends its PID to `--pid-file` (one line per start). With `--linger` (stdio) it is a stuck server: once
its stdin closes it ignores SIGTERM and stays, so only a SIGKILL ends it. Tools:
    echo(text)    answers {"text", "pid", "peer"}: this process, and over HTTP the client's address and port (the TCP
                  connection the call came in on; null over stdio)
    exit_now()    writes a line to stderr, then ends the process without answering (a server dying mid-call)
    hang()        never answers (a call that times out)
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
from typing import Any

import anyio
from mcp.server.mcpserver import Context, MCPServer

STDERR_LINE = "pid_server: exiting on request"


def build_server() -> MCPServer:
    server = MCPServer("pid-world", version="1.0.0")

    @server.tool(description="Answer the text, this process's PID and the TCP connection of the call.")
    def echo(text: str, ctx: Context) -> dict[str, Any]:
        client = getattr(ctx.request_context.request, "client", None)  # a Starlette request over HTTP
        return {"text": text, "pid": os.getpid(), "peer": f"{client.host}:{client.port}" if client else None}

    @server.tool(description="End this process without answering.")
    def exit_now() -> dict[str, Any]:
        print(STDERR_LINE, file=sys.stderr, flush=True)
        os._exit(3)

    @server.tool(description="Never answer.")
    async def hang() -> dict[str, Any]:
        await anyio.sleep_forever()
        return {}

    return server


def main() -> None:
    parser = argparse.ArgumentParser(description="A downstream MCP server that reports its PID.")
    parser.add_argument("--pid-file", required=True)
    parser.add_argument("--http", action="store_true")
    parser.add_argument("--port", type=int, default=8933)
    parser.add_argument("--linger", action="store_true")
    args = parser.parse_args()
    with open(args.pid_file, "a", encoding="utf-8") as started:
        started.write(f"{os.getpid()}\n")
    server = build_server()
    if not args.http:
        server.run("stdio")
        if args.linger:
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            time.sleep(3600)
        return
    import uvicorn

    uvicorn.run(server.streamable_http_app(streamable_http_path="/mcp"), host="127.0.0.1", port=args.port)


if __name__ == "__main__":
    main()
