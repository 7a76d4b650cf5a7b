"""A contacts CRM shaped like Sagaz's toybox, answering in the shape `--answers` names (the SDK's low-level Server,
stdio), for the pack tests: the same tools and arguments as the toybox pack expects.

    python tests/proxy/toybox_server.py --state world.json --answers text [--echo-deletes]

`--answers`:
    text        the JSON as a text block only, no structuredContent (Sagaz's toybox, most MCP servers)
    structured  structuredContent only (an empty content list)
    both        structuredContent and the same JSON as a text block (the SDK's MCPServer)
    plain       a sentence that is not JSON ("Created contact c-3 (Ada).")

The world is a JSON file (`{"contacts": {...}, "next": 3, "seen": {...}}`) the test reads and changes directly (a
drift). A call carrying `_meta["io.semantic-saga/idempotency_key"]` that was seen before answers the first answer
again without acting twice. `get_contact` of a missing id answers isError, as `create_contact` with the email
`fail@example.com` does (a tool that refuses); `update_contact` to the email `partial@example.com` saves the change,
then answers isError (a call that failed half-way). `delete_contact` answers `{"id", "deleted": true}`, or, with
`--echo-deletes`, the row it deleted (as Sagaz's toybox and many servers do: every captured field, though the
contact is gone).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import anyio
import mcp.types as types
from mcp.server import Server, ServerRequestContext
from mcp.server.stdio import stdio_server

KEY = "io.semantic-saga/idempotency_key"
FIELDS = ("name", "email", "company")


def _schema(required: list[str], *optional: str) -> dict[str, Any]:
    names = [*required, *optional]
    properties = {name: {"type": ["string", "null"] if name == "company" else "string"} for name in names}
    return {"type": "object", "properties": properties, "required": required}


TOOLS = [
    types.Tool(name="list_contacts", description="List every contact.", input_schema=_schema([])),
    types.Tool(name="get_contact", description="Read one contact by id.", input_schema=_schema(["id"])),
    types.Tool(
        name="create_contact",
        description="Create a contact (an id restores one under its old id).",
        input_schema=_schema(["name", "email"], "company", "id"),
    ),
    types.Tool(
        name="update_contact",
        description="Change a contact's fields.",
        input_schema=_schema(["id"], "name", "email", "company"),
    ),
    types.Tool(name="delete_contact", description="Delete a contact by id.", input_schema=_schema(["id"])),
]


class World:
    def __init__(self, path: Path) -> None:
        self.path = path
        if not path.exists():
            self.save({"contacts": {}, "next": 1, "seen": {}})

    def load(self) -> dict[str, Any]:
        return dict(json.loads(self.path.read_text()))

    def save(self, data: dict[str, Any]) -> None:
        self.path.write_text(json.dumps(data, indent=1))


def act(data: dict[str, Any], tool: str, args: dict[str, Any], echo: bool = False) -> tuple[dict[str, Any], bool]:
    """(the answer, whether it is an error) of one call on `data`, which it changes."""
    contacts: dict[str, Any] = data["contacts"]
    if tool == "list_contacts":
        return {"contacts": list(contacts.values())}, False
    if tool == "create_contact":
        if args.get("email") == "fail@example.com":
            return {"error": "that address bounces; contact not created"}, True
        ident = args.get("id") or f"c-{data['next']}"
        data["next"] += 0 if args.get("id") else 1
        contacts[ident] = {"id": ident, **{name: args.get(name) for name in FIELDS}}
        return dict(contacts[ident]), False
    contact = contacts.get(str(args.get("id")))
    if contact is None:
        return {"error": f"no contact {args.get('id')!r}"}, True
    if tool == "get_contact":
        return dict(contact), False
    if tool == "update_contact":
        contact.update({name: args[name] for name in FIELDS if name in args})
        if args.get("email") == "partial@example.com":  # saved, then a failure to answer: it changed anyway
            return {"error": "the mail server timed out after the contact was saved"}, True
        return dict(contact), False
    del contacts[contact["id"]]  # delete_contact
    return (dict(contact) if echo else {"id": contact["id"], "deleted": True}), False


def shaped(answer: dict[str, Any], is_error: bool, shape: str) -> types.CallToolResult:
    text = json.dumps(answer)
    if is_error or shape == "plain":
        words = answer.get("error") or ", ".join(f"{key} {value}" for key, value in answer.items())
        return types.CallToolResult(content=[types.TextContent(type="text", text=f"Done: {words}.")], is_error=is_error)
    blocks = [] if shape == "structured" else [types.TextContent(type="text", text=text)]
    structured = answer if shape in ("structured", "both") else None
    return types.CallToolResult(content=blocks, structured_content=structured)


def build(world: World, shape: str, echo: bool = False) -> Server[Any]:
    async def list_tools(ctx: ServerRequestContext, params: types.PaginatedRequestParams | None) -> Any:
        return types.ListToolsResult(tools=TOOLS)

    async def call_tool(ctx: ServerRequestContext, params: types.CallToolRequestParams) -> types.CallToolResult:
        meta = params.meta if isinstance(params.meta, dict) else getattr(params.meta, "model_extra", None)
        key = (meta or {}).get(KEY)
        data = world.load()
        data.setdefault("log", []).append(key if isinstance(key, str) else "")  # every call received, in order
        if isinstance(key, str) and key in data["seen"]:
            answer, is_error = data["seen"][key]
        else:
            answer, is_error = act(data, params.name, dict(params.arguments or {}), echo)
            if isinstance(key, str):
                data["seen"][key] = [answer, is_error]
        world.save(data)
        return shaped(answer, is_error, shape)

    return Server("toybox", version="1.0.0", on_list_tools=list_tools, on_call_tool=call_tool)


async def main(state: Path, shape: str, echo: bool) -> None:
    server = build(World(state), shape, echo)
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--state", required=True, type=Path)
    parser.add_argument("--answers", choices=["text", "structured", "both", "plain"], default="text")
    parser.add_argument("--echo-deletes", action="store_true", help="delete_contact answers the deleted row")
    options = parser.parse_args()
    anyio.run(main, options.state, options.answers, options.echo_deletes)
