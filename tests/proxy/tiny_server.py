"""A second downstream for the proxy tests (the SDK's low-level Server), beside examples/demo_mcp_server.py.

    python tests/proxy/tiny_server.py                      # stdio
    python tests/proxy/tiny_server.py --http --port 8932   # Streamable HTTP at /mcp

It exposes `send_email` (the demo world has one too: a collision), a resource `note://welcome`, a template
`note://{name}` (`note://missing` answers a not-found error) and a prompt `greeting`, and tools that exercise the
proxy's relays: `ask_user` (elicitation), `summarize` (sampling), `client_roots` (roots/list), `slow_report`
(progress and log messages), and the catalog: `add_tool` (a new tool, then tools/list_changed) and `break_listing`
(the next tools/list fails, then tools/list_changed); `env_has` says whether a variable reached its environment.
Its tools/list answers three tools per page, so a client must follow the cursor.

With `--journal-tools` it also offers the durable path's test tools: `hang` (never answers, and appends a line to
the file `--called-file` names when it is called: a proxy killed mid-call), `wipe_cache` (mutates, yet claims
readOnlyHint: a classification trap), an unannotated `transfer_funds` (irreversible by its name) and
`echo_env` (answers a variable's value: a secret that must not reach the journal).
"""

from __future__ import annotations

import argparse
import json
import os
from typing import Any

import anyio
import mcp.types as types
from mcp.server import Server, ServerRequestContext
from mcp.server.lowlevel.server import NotificationOptions
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError
from mcp.shared.message import ServerMessageMetadata
from mcp_types.jsonrpc import INTERNAL_ERROR, INVALID_PARAMS


def _tool(name: str, description: str, /, **properties: str) -> types.Tool:
    schema = {
        "type": "object",
        "properties": {key: {"type": kind} for key, kind in properties.items()},
        "required": list(properties),
    }
    return types.Tool(name=name, description=description, input_schema=schema)


PAGE_SIZE = 3
RESOURCE_NOT_FOUND = -32002  # the spec's code for resources/read of a URI the server does not have
FIXED_TOOLS = [
    _tool("send_email", "Send an email from the tiny outbox.", to="string", subject="string"),
    _tool("ask_user", "Ask the user a question (elicitation).", question="string"),
    _tool("summarize", "Have the client's model summarize a text (sampling).", text="string"),
    _tool("client_roots", "The client's roots (roots/list)."),
    _tool("slow_report", "Report progress and log messages, then answer.", steps="integer"),
    _tool("add_tool", "Add a tool, then say the tool list changed.", name="string"),
    _tool("break_listing", "Make the next tools/list fail, then say the tool list changed."),
    _tool("env_has", "Whether this process has the environment variable (never its value).", name="string"),
]


JOURNAL_TOOLS = [
    _tool("hang", "Start a long job and never answer.", job="string"),
    types.Tool(
        name="wipe_cache",
        description="Delete every cached entry (mutates, though it claims to be read-only).",
        input_schema={"type": "object", "properties": {}},
        annotations=types.ToolAnnotations(read_only_hint=True),
    ),
    _tool("transfer_funds", "Move money (no annotations at all).", amount="integer"),
    _tool("echo_env", "Answer an environment variable's value and some padding (a careless tool).", name="string"),
]


class State:
    def __init__(self, journal_tools: bool = False, called_file: str = "") -> None:
        self.journal_tools = journal_tools
        self.called_file = called_file
        self.added: list[types.Tool] = []
        self.break_next_listing = False
        self.outbox: list[dict[str, Any]] = []


def _text(value: Any) -> types.CallToolResult:
    text = value if isinstance(value, str) else json.dumps(value)
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)])


def build_server(state: State) -> Server[Any]:
    async def list_tools(ctx: ServerRequestContext[Any], params: Any) -> types.ListToolsResult:
        if state.break_next_listing:
            state.break_next_listing = False
            raise MCPError(INTERNAL_ERROR, "the tiny server's tool list is broken on purpose")
        # Pages of PAGE_SIZE, so the proxy must follow the cursor to see every tool.
        tools = [*FIXED_TOOLS, *(JOURNAL_TOOLS if state.journal_tools else []), *state.added]
        start = int(params.cursor) if params is not None and params.cursor else 0
        following = str(start + PAGE_SIZE) if start + PAGE_SIZE < len(tools) else None
        return types.ListToolsResult(tools=tools[start : start + PAGE_SIZE], next_cursor=following)

    async def ask(ctx: ServerRequestContext[Any], request: Any, result_type: type[Any]) -> Any:
        related = ServerMessageMetadata(related_request_id=ctx.request_id)
        return await ctx.session.send_request(request, result_type, metadata=related)

    async def call_tool(ctx: ServerRequestContext[Any], params: types.CallToolRequestParams) -> types.CallToolResult:
        args = params.arguments or {}
        if params.name == "send_email":
            state.outbox.append(args)
            return _text({"sent": len(state.outbox), "to": args["to"]})
        if params.name == "ask_user":
            schema = {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}
            request = types.ElicitRequest(
                params=types.ElicitRequestFormParams(message=args["question"], requested_schema=schema)
            )
            answer = await ask(ctx, request, types.ElicitResult)
            return _text({"action": answer.action, "content": answer.content})
        if params.name == "summarize":
            message = types.SamplingMessage(role="user", content=types.TextContent(type="text", text=args["text"]))
            request = types.CreateMessageRequest(
                params=types.CreateMessageRequestParams(messages=[message], max_tokens=50)
            )
            sampled = await ask(ctx, request, types.CreateMessageResult)
            return _text({"summary": sampled.content.text, "model": sampled.model})
        if params.name == "client_roots":
            roots = await ask(ctx, types.ListRootsRequest(), types.ListRootsResult)
            return _text({"roots": [str(root.uri) for root in roots.roots]})
        if params.name == "slow_report":
            for step in range(1, int(args["steps"]) + 1):
                await ctx.session.report_progress(step, float(args["steps"]), f"step {step}")
                log = types.LoggingMessageNotificationParams(level="info", logger="tiny", data=f"did step {step}")
                await ctx.session.send_notification(
                    types.LoggingMessageNotification(params=log), related_request_id=ctx.request_id
                )
            return _text({"steps": args["steps"]})
        if params.name == "add_tool":
            state.added.append(_tool(args["name"], "A tool added at run time."))
            await ctx.session.send_tool_list_changed()
            return _text({"added": args["name"]})
        if params.name == "break_listing":
            state.break_next_listing = True
            await ctx.session.send_tool_list_changed()
            return _text({"broken": True})
        if params.name == "env_has":
            value = os.environ.get(args["name"], "")
            return _text({"set": bool(value), "length": len(value)})
        if state.journal_tools and params.name == "hang":
            if state.called_file:
                meta = params.meta if isinstance(params.meta, dict) else getattr(params.meta, "model_extra", None)
                with open(state.called_file, "a", encoding="utf-8") as called:
                    called.write(json.dumps({"tool": "hang", "meta": dict(meta or {})}, default=str) + "\n")
            await anyio.sleep_forever()
        if state.journal_tools and params.name == "echo_env":
            return _text({"value": os.environ.get(args["name"], ""), "padding": "x" * 400})
        if state.journal_tools and params.name in ("wipe_cache", "transfer_funds"):
            return _text({"ran": params.name})
        if params.name in {tool.name for tool in state.added}:
            return _text({"ran": params.name})
        raise MCPError(INVALID_PARAMS, f"Unknown tool {params.name!r}")

    async def list_resources(ctx: ServerRequestContext[Any], params: Any) -> types.ListResourcesResult:
        welcome = types.Resource(uri="note://welcome", name="welcome", mime_type="text/plain")
        return types.ListResourcesResult(resources=[welcome])

    async def list_templates(ctx: ServerRequestContext[Any], params: Any) -> types.ListResourceTemplatesResult:
        template = types.ResourceTemplate(uri_template="note://{name}", name="note")
        return types.ListResourceTemplatesResult(resource_templates=[template])

    async def read_resource(ctx: ServerRequestContext[Any], params: types.ReadResourceRequestParams) -> Any:
        name = params.uri.removeprefix("note://")
        if name == "missing":  # a read the server answers with its own error (the journaled-read tests)
            raise MCPError(RESOURCE_NOT_FOUND, f"Resource not found: no note {params.uri!r}", data={"uri": params.uri})
        text = "Welcome to the tiny world." if name == "welcome" else f"A note called {name}."
        return types.ReadResourceResult(
            contents=[types.TextResourceContents(uri=params.uri, text=text, mime_type="text/plain")]
        )

    async def list_prompts(ctx: ServerRequestContext[Any], params: Any) -> types.ListPromptsResult:
        argument = types.PromptArgument(name="name", required=True)
        return types.ListPromptsResult(prompts=[types.Prompt(name="greeting", arguments=[argument])])

    async def get_prompt(ctx: ServerRequestContext[Any], params: types.GetPromptRequestParams) -> Any:
        name = (params.arguments or {}).get("name", "you")
        message = types.PromptMessage(role="user", content=types.TextContent(type="text", text=f"Say hello to {name}."))
        return types.GetPromptResult(messages=[message])

    return Server(
        "tiny-world",
        version="1.0.0",
        instructions="A tiny world for proxy tests.",
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_list_resources=list_resources,
        on_list_resource_templates=list_templates,
        on_read_resource=read_resource,
        on_list_prompts=list_prompts,
        on_get_prompt=get_prompt,
    )


async def _stdio(server: Server[Any]) -> None:
    options = server.create_initialization_options(NotificationOptions(tools_changed=True))
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, options)


def main() -> None:
    parser = argparse.ArgumentParser(description="A tiny downstream MCP server for the proxy tests.")
    parser.add_argument("--http", action="store_true")
    parser.add_argument("--port", type=int, default=8932)
    parser.add_argument("--journal-tools", action="store_true")
    parser.add_argument("--called-file", default="")
    args = parser.parse_args()
    server = build_server(State(args.journal_tools, args.called_file))
    if not args.http:
        anyio.run(_stdio, server)
        return
    import uvicorn

    app = server.streamable_http_app(streamable_http_path="/mcp")
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
