"""A small downstream MCP server modelling a CRM, an email outbox, a tweet timeline and a bank, for trying the
proxy (examples/proxy.json), `kind: mcp` actions and `import_mcp_tools` locally (the example registry's
`crm_create_contact` calls it). Loopback only; no auth.

    python examples/demo_mcp_server.py --http --port 8931     # Streamable HTTP at http://127.0.0.1:8931/mcp
    python examples/demo_mcp_server.py                        # stdio (one world per process)
    python examples/demo_mcp_server.py --state world.json     # stdio, the world kept in a file between processes
    python examples/demo_mcp_server.py seed                   # a deterministic sample world into demo-world.json
    python examples/demo_mcp_server.py inspect                # print that world: contacts, emails, tweets, accounts

Tools (annotations are honest, so an import proposes the right classes): get_contact and list_contacts
(read-only), create_contact (an optional `id` recreates a deleted contact under its old one) and update_contact
(additive, not destructive), delete_contact (destructive, idempotent), send_email, post_tweet and transfer_funds
(destructive, not idempotent; transfer_funds fails with isError when the amount exceeds the balance),
list_timeline (read-only), get_call_log (read-only: every call with the idempotency key it carried).

Writes honour the idempotency key Semantic Saga puts in `_meta["io.semantic-saga/idempotency_key"]`: a repeated
key returns the first answer without acting twice. Over HTTP, `GET /world` shows the state and the call log and
`POST /reset` restores the seed world (test helpers, not MCP).
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import fcntl
import json
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

IDEMPOTENCY_META_KEY = "io.semantic-saga/idempotency_key"
# Balances in cents: the payroll account can pay 1,000.00, the vendor starts empty.
SEED_ACCOUNTS = {"acc-payroll": 100_000, "acc-vendor": 0}


DEFAULT_STATE_FILE = "demo-world.json"


def _seed() -> dict[str, Any]:
    """The empty world every process without a state file starts from (the tests count on `c-1` being first)."""
    return {
        "contacts": {},
        "outbox": [],
        "tweets": [],
        "accounts": dict(SEED_ACCOUNTS),
        "calls": [],
        "answers": {},
        "next_id": 1,
    }


def sample_world() -> dict[str, Any]:
    """The world `seed` writes: the same three contacts, one sent email and two tweets every time."""
    world = _seed()
    people = [
        ("Ada Lovelace", "ada@example.com"),
        ("Grace Hopper", "grace@example.com"),
        ("Alan Turing", "alan@example.com"),
    ]
    for number, (name, email) in enumerate(people, start=1):
        world["contacts"][f"c-{number}"] = {"id": f"c-{number}", "name": name, "email": email}
    world["next_id"] = len(people) + 1
    world["outbox"].append(
        {"message_id": "m-1", "to": "ada@example.com", "subject": "Welcome", "body": "Glad to have you, Ada."}
    )
    world["tweets"] += [
        {"tweet_id": "tw-1", "text": "Our CRM now has three contacts."},
        {"tweet_id": "tw-2", "text": "Payroll runs on Fridays."},
    ]
    return world


class World:
    """The in-memory world; with a state file it is loaded and saved around every call (stdio runs one process
    per connection, so without a file each connection would start from the seed)."""

    def __init__(self, state_file: str | None = None) -> None:
        self.state_file = Path(state_file) if state_file else None
        self.data = _seed()
        self.lock = threading.Lock()

    @contextlib.contextmanager
    def open(self) -> Iterator[dict[str, Any]]:
        with self.lock, self._file_lock():
            if self.state_file is not None and self.state_file.exists():
                self.data = json.loads(self.state_file.read_text(encoding="utf-8"))
            yield self.data
            if self.state_file is not None:
                tmp = self.state_file.with_suffix(".tmp")
                tmp.write_text(json.dumps(self.data, sort_keys=True), encoding="utf-8")
                os.replace(tmp, self.state_file)

    @contextlib.contextmanager
    def _file_lock(self) -> Iterator[None]:
        if self.state_file is None:
            yield
            return
        with open(f"{self.state_file}.lock", "w") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            yield

    def reset(self, world: dict[str, Any] | None = None) -> None:
        """Replace the world with `world` (the empty seed when None)."""
        with self.open() as data:
            data.clear()
            data.update(copy.deepcopy(world) if world is not None else _seed())

    def snapshot(self) -> dict[str, Any]:
        with self.open() as data:
            return copy.deepcopy(data)


def _key(ctx: Context) -> str | None:
    meta = ctx.request_context.meta or {}
    value = meta.get(IDEMPOTENCY_META_KEY)
    return value if isinstance(value, str) else None


def _by_id(contacts: dict[str, Any]) -> list[dict[str, Any]]:
    """Contacts in id order, c-2 before c-10."""
    return sorted(contacts.values(), key=lambda c: (len(c["id"]), c["id"]))


def _log(data: dict[str, Any], tool: str, arguments: dict[str, Any], key: str | None, outcome: str) -> None:
    data["calls"].append({"tool": tool, "arguments": arguments, "idempotency_key": key, "outcome": outcome})


def build_server(world: World) -> MCPServer:
    server = MCPServer("demo-world", version="1.0.0", instructions="A toy CRM, email outbox, tweet timeline and bank.")

    def once(data: dict[str, Any], tool: str, key: str | None) -> dict[str, Any] | None:
        """The first answer given for this key, if the same call was already applied."""
        answer: dict[str, Any] | None = data["answers"].get(f"{tool}:{key}") if key else None
        return answer

    def remember(data: dict[str, Any], tool: str, key: str | None, answer: dict[str, Any]) -> dict[str, Any]:
        if key:
            data["answers"][f"{tool}:{key}"] = answer
        return answer

    @server.tool(
        description="Read one CRM contact by id.",
        annotations=ToolAnnotations(title="Get contact", readOnlyHint=True, openWorldHint=False),
    )
    def get_contact(id: str, ctx: Context) -> dict[str, Any]:
        with world.open() as data:
            _log(data, "get_contact", {"id": id}, _key(ctx), "ok" if id in data["contacts"] else "error")
            if id not in data["contacts"]:
                raise ToolError(f"no contact {id}")
            return dict(data["contacts"][id])

    @server.tool(
        description="Every CRM contact, in id order.",
        annotations=ToolAnnotations(title="List contacts", readOnlyHint=True, openWorldHint=False),
    )
    def list_contacts(ctx: Context) -> dict[str, Any]:
        with world.open() as data:
            _log(data, "list_contacts", {}, _key(ctx), "ok")
            return {"contacts": [dict(contact) for contact in _by_id(data["contacts"])]}

    @server.tool(
        description=(
            "Create a CRM contact; answers the new contact with its id. Give `id` only to recreate a deleted "
            "contact under its old id (refused if that id is taken)."
        ),
        annotations=ToolAnnotations(
            title="Create contact", readOnlyHint=False, destructiveHint=False, idempotentHint=False
        ),
    )
    def create_contact(name: str, email: str, ctx: Context, id: str | None = None) -> dict[str, Any]:
        key = _key(ctx)
        with world.open() as data:
            arguments = {"name": name, "email": email, **({"id": id} if id is not None else {})}
            if (answer := once(data, "create_contact", key)) is not None:
                _log(data, "create_contact", arguments, key, "ok")
                return answer
            taken = id is not None and id in data["contacts"]
            _log(data, "create_contact", arguments, key, "error" if taken else "ok")
            if taken:
                raise ToolError(f"contact {id} already exists; omit id to create a new contact")
            if id is None:
                id = f"c-{data['next_id']}"
                data["next_id"] += 1
            contact = {"id": id, "name": name, "email": email}
            data["contacts"][id] = contact
            return remember(data, "create_contact", key, dict(contact))

    @server.tool(
        description="Change a contact's name and/or email; answers the contact as it is now.",
        annotations=ToolAnnotations(
            title="Update contact", readOnlyHint=False, destructiveHint=False, idempotentHint=True
        ),
    )
    def update_contact(id: str, ctx: Context, name: str | None = None, email: str | None = None) -> dict[str, Any]:
        with world.open() as data:
            arguments = {"id": id, "name": name, "email": email}
            contact = data["contacts"].get(id)
            _log(data, "update_contact", arguments, _key(ctx), "ok" if contact else "error")
            if contact is None:
                raise ToolError(f"no contact {id}")
            contact.update({field: value for field, value in (("name", name), ("email", email)) if value is not None})
            return dict(contact)

    @server.tool(
        description="Delete a contact; deleting one that is already gone answers deleted=false.",
        annotations=ToolAnnotations(
            title="Delete contact", readOnlyHint=False, destructiveHint=True, idempotentHint=True
        ),
    )
    def delete_contact(id: str, ctx: Context) -> dict[str, Any]:
        with world.open() as data:
            _log(data, "delete_contact", {"id": id}, _key(ctx), "ok")
            return {"id": id, "deleted": data["contacts"].pop(id, None) is not None}

    @server.tool(
        description="Send an email (cannot be unsent).",
        annotations=ToolAnnotations(
            title="Send email", readOnlyHint=False, destructiveHint=True, idempotentHint=False, openWorldHint=True
        ),
    )
    def send_email(to: str, subject: str, body: str, ctx: Context) -> dict[str, Any]:
        key = _key(ctx)
        with world.open() as data:
            _log(data, "send_email", {"to": to, "subject": subject, "body": body}, key, "ok")
            if (answer := once(data, "send_email", key)) is not None:
                return answer
            message = {"message_id": f"m-{len(data['outbox']) + 1}", "to": to, "subject": subject, "body": body}
            data["outbox"].append(message)
            return remember(data, "send_email", key, {"message_id": message["message_id"], "to": to})

    @server.tool(
        description="Post a tweet to the public timeline (cannot be unseen once read).",
        annotations=ToolAnnotations(
            title="Post tweet", readOnlyHint=False, destructiveHint=True, idempotentHint=False, openWorldHint=True
        ),
    )
    def post_tweet(text: str, ctx: Context) -> dict[str, Any]:
        key = _key(ctx)
        with world.open() as data:
            _log(data, "post_tweet", {"text": text}, key, "ok")
            if (answer := once(data, "post_tweet", key)) is not None:
                return answer
            tweet = {"tweet_id": f"tw-{len(data.setdefault('tweets', [])) + 1}", "text": text}
            data["tweets"].append(tweet)
            return remember(data, "post_tweet", key, dict(tweet))

    @server.tool(
        description="The latest tweets, newest first (at most `limit`).",
        annotations=ToolAnnotations(title="Timeline", readOnlyHint=True, openWorldHint=True),
    )
    def list_timeline(ctx: Context, limit: int = 20) -> dict[str, Any]:
        with world.open() as data:
            _log(data, "list_timeline", {"limit": limit}, _key(ctx), "ok")
            return {"tweets": [dict(tweet) for tweet in reversed(data.get("tweets", []))][: max(limit, 0)]}

    @server.tool(
        description="Move money between accounts (amount in cents); fails when the balance is too low.",
        annotations=ToolAnnotations(
            title="Transfer funds", readOnlyHint=False, destructiveHint=True, idempotentHint=False, openWorldHint=True
        ),
    )
    def transfer_funds(from_account: str, to_account: str, amount: int, ctx: Context) -> dict[str, Any]:
        key = _key(ctx)
        with world.open() as data:
            arguments = {"from_account": from_account, "to_account": to_account, "amount": amount}
            if (answer := once(data, "transfer_funds", key)) is not None:
                _log(data, "transfer_funds", arguments, key, "ok")
                return answer
            accounts = data["accounts"]
            problem = None
            if from_account not in accounts or to_account not in accounts:
                problem = "unknown account"
            elif amount <= 0 or accounts[from_account] < amount:
                problem = f"insufficient funds in {from_account} (balance {accounts[from_account]}, asked {amount})"
            _log(data, "transfer_funds", arguments, key, "error" if problem else "ok")
            if problem:
                raise ToolError(problem)
            accounts[from_account] -= amount
            accounts[to_account] += amount
            answer = {"transfer_id": f"t-{len(data['calls'])}", "balance": accounts[from_account]}
            return remember(data, "transfer_funds", key, answer)

    @server.tool(
        description="Every tool call this world received, with the idempotency key each carried.",
        annotations=ToolAnnotations(title="Call log", readOnlyHint=True, openWorldHint=False),
    )
    def get_call_log() -> dict[str, Any]:
        with world.open() as data:
            return {"calls": copy.deepcopy(data["calls"])}

    # The world lock may be held by a slow tool call: wait for it in a thread, never on the event loop.
    @server.custom_route("/world", methods=["GET"])
    async def world_state(request: Request) -> Response:
        return JSONResponse(await anyio.to_thread.run_sync(world.snapshot))

    @server.custom_route("/reset", methods=["POST"])
    async def world_reset(request: Request) -> Response:
        await anyio.to_thread.run_sync(world.reset)
        return JSONResponse({"reset": True})

    return server


def http_app(server: MCPServer) -> Any:
    """The Streamable HTTP app at /mcp (stateful, the SDK's default), plus /world and /reset."""
    return server.streamable_http_app(streamable_http_path="/mcp")


def _cents(amount: int) -> str:
    return f"{amount / 100:,.2f}"


def describe_world(data: dict[str, Any]) -> str:
    """The world as `inspect` prints it: one section per part, one line per thing."""
    contacts = _by_id(data["contacts"])
    outbox, tweets, calls = data["outbox"], data.get("tweets", []), data["calls"]
    lines = [f"contacts ({len(contacts)})"]
    lines += [f"  {c['id']:<6} {c['name']:<20} {c['email']}" for c in contacts]
    lines.append(f"emails sent ({len(outbox)})")
    lines += [f"  {m['message_id']:<6} to {m['to']:<24} {m['subject']!r}" for m in outbox]
    lines.append(f"tweets ({len(tweets)})")
    lines += [f"  {t['tweet_id']:<6} {t['text']}" for t in tweets]
    lines.append("accounts")
    lines += [f"  {name:<12} {_cents(balance):>12}" for name, balance in sorted(data["accounts"].items())]
    lines.append(f"call log ({len(calls)})")
    lines += [
        f"  {number:>3}  {call['tool']:<15} {call['outcome']:<5} {json.dumps(call['arguments'], sort_keys=True)}"
        for number, call in enumerate(calls, start=1)
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Demo CRM + email + tweets + bank MCP server (loopback only).")
    parser.add_argument(
        "command",
        nargs="?",
        choices=("serve", "seed", "inspect"),
        default="serve",
        help="serve (the default), seed: write the sample world to the state file, inspect: print it",
    )
    parser.add_argument("--http", action="store_true", help="serve Streamable HTTP instead of stdio")
    parser.add_argument("--port", type=int, default=8931, help="HTTP port on 127.0.0.1 (default 8931)")
    parser.add_argument(
        "--state", help=f"keep the world in this JSON file (useful with stdio; seed and inspect: {DEFAULT_STATE_FILE})"
    )
    args = parser.parse_args(argv)
    if args.command != "serve":
        world = World(args.state or DEFAULT_STATE_FILE)
        if args.command == "seed":
            world.reset(sample_world())
            print(f"seeded {world.state_file}: 3 contacts, 1 email, 2 tweets, 2 accounts, an empty call log")
            return
        if world.state_file is not None and not world.state_file.exists():
            parser.exit(1, f"{world.state_file} does not exist; run `{parser.prog} seed` first\n")
        print(describe_world(world.snapshot()))
        return
    server = build_server(World(args.state))
    if not args.http:
        server.run("stdio")
        return
    import uvicorn

    uvicorn.run(http_app(server), host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
