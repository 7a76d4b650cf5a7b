"""`import_mcp_tools URL_OR_COMMAND`: list a downstream MCP server's tools and write draft `kind: mcp` contracts.

The drafts are a registry file (the format load_actions reads) whose contracts are `"active": false` and carry
`review: {draft: true, source, notes}`: validation refuses an active draft, so nothing imported runs before a person
has read the notes, fixed the proposals and removed the draft marker.

Reversibility is proposed from the tool's MCP annotations, never guessed from its name: readOnlyHint → read_only;
anything else → unknown, because "reversible" means the inverse is known and an import knows no compensation yet
(the note says which tool to add as compensation before marking it reversible). idempotentHint →
execution_policy.idempotent.
"""

from __future__ import annotations

import json
import re
import shlex
from argparse import ArgumentParser
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError
from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError
from mcp.types import Tool

from registry.actions.mcp import DEFAULT_TIMEOUT_SECONDS, ServerListing, list_tools
from registry.contracts import SCHEMA_VERSION, validate_registry_document
from registry.errors import ActionFailure, RegistryError

DEFAULT_CONTRACT_VERSION = "0.1.0"
# Authorization schemes kept as a literal prefix before a secret reference.
_SCHEMES = ("bearer", "basic", "token")
_ID_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]")
_ENV_UNSAFE = re.compile(r"[^A-Za-z0-9]")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_DESCRIPTION_LIMIT = 2000


class Command(BaseCommand):
    help = (
        "Connect to a downstream MCP server (a URL: Streamable HTTP; anything else: a command started over stdio), "
        "list its tools and write one draft kind:mcp contract per tool (inactive, marked review.draft, with the "
        "input schema copied and reversibility proposed from the MCP annotations, each proposal explained in "
        "review.notes). Writes a registry file to stdout or --output; progress goes to stderr. For a command with "
        "options of its own, put it after --: import_mcp_tools -- python server.py --flag."
    )

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument(
            "target",
            nargs="+",
            metavar="URL_OR_COMMAND",
            help="http(s)://host/mcp, or the command line of a stdio server (one quoted string or several words)",
        )
        parser.add_argument(
            "--header",
            action="append",
            default=[],
            metavar="'NAME: VALUE'",
            help="HTTP header for the import connection (repeatable). The draft reads it from the environment "
            "(secret_ref env://MCP_<NAME>); a VALUE of env://VAR (optionally after 'Bearer ') is used as given.",
        )
        parser.add_argument(
            "--env",
            action="append",
            default=[],
            metavar="NAME=VALUE",
            help="environment variable for a stdio server (repeatable); the draft references env://NAME",
        )
        parser.add_argument("--output", "-o", help="write the drafts to this file instead of stdout")
        parser.add_argument("--prefix", help="action id prefix (default: the server's name followed by a dot)")
        parser.add_argument(
            "--contract-version",
            default=DEFAULT_CONTRACT_VERSION,
            help=f"version of every draft contract (default {DEFAULT_CONTRACT_VERSION})",
        )
        parser.add_argument(
            "--timeout",
            type=float,
            default=DEFAULT_TIMEOUT_SECONDS,
            help=f"seconds to connect and list the tools (default {DEFAULT_TIMEOUT_SECONDS:g})",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        connect, draft_server, notes = _server_blocks(options["target"], options["header"], options["env"])
        where = connect.get("url") or shlex.join([connect["command"], *connect.get("args", [])])
        self._progress(f"Connecting to {where} ({connect['transport']}) ...")
        try:
            listing = list_tools(connect, timeout=options["timeout"])
        except ActionFailure as failure:
            raise CommandError(f"Could not list the tools of {where}. {failure.message}") from None
        server_label = f"{listing.name or 'unnamed server'} {listing.version or ''}".strip()
        self._progress(f"Connected: {server_label}, protocol {listing.protocol_version}; {len(listing.tools)} tool(s).")
        prefix = options["prefix"] if options["prefix"] is not None else _default_prefix(listing)
        source = f"import_mcp_tools from {where} ({server_label}, protocol {listing.protocol_version})"
        drafts = _drafts(listing, draft_server, notes, prefix, options["contract_version"], source)
        for contract in drafts:
            self._progress(f"  {contract['id']}: {_summary(contract)}")
        document = {"schema_version": SCHEMA_VERSION, "actions": drafts}
        try:
            validate_registry_document(document)
        except RegistryError as exc:
            raise CommandError(f"The drafts for {where} are not a valid registry file: {exc.message}") from None
        self._write(document, options["output"], len(drafts))

    def _progress(self, message: str) -> None:
        self.stderr.write(message, style_func=lambda text: text)

    def _write(self, document: dict[str, Any], output: str | None, count: int) -> None:
        text = json.dumps(document, indent=2, ensure_ascii=False) + "\n"
        if output:
            try:
                Path(output).write_text(text, encoding="utf-8")
            except OSError as exc:
                raise CommandError(f"Cannot write {output}: {exc.strerror}.") from None
        else:
            self.stdout.write(text, ending="")
        target = output or "stdout"
        self._progress(
            f"Wrote {count} draft contract(s) to {target}. They are inactive and marked review.draft: read each "
            "contract's review.notes, fix the proposals (add compensations, then reversibility), remove review.draft, "
            'set "active": true and register them with load_actions.'
        )


# --- server blocks ----------------------------------------------------------------------------------------------


def _server_blocks(
    target: list[str], headers: list[str], env: list[str]
) -> tuple[dict[str, Any], dict[str, Any], list[str]]:
    """(block to connect with now, block written to the drafts, notes about it). Literal secrets given on the
    command line are used for this connection only; the drafts reference the environment instead."""
    words = shlex.split(target[0]) if len(target) == 1 else list(target)
    if not words:
        raise CommandError("Give a URL (http://host/mcp) or the command line of a stdio server.")
    if len(words) == 1 and re.match(r"^https?://", words[0]):
        if env:
            raise CommandError("--env is for stdio servers; an HTTP server gets --header.")
        connect_headers, draft_headers, notes = _references([_split_header(h) for h in headers], "header")
        connect: dict[str, Any] = {"transport": "streamable_http", "url": words[0], "headers": connect_headers}
        draft: dict[str, Any] = {"transport": "streamable_http", "url": words[0]}
        if draft_headers:
            draft["headers"] = draft_headers
        return connect, draft, notes
    if headers:
        raise CommandError("--header is for HTTP servers; a stdio server gets --env NAME=VALUE.")
    connect_env, draft_env, notes = _references([_split_env(item) for item in env], "environment variable")
    connect = {"transport": "stdio", "command": words[0], "args": words[1:], "env": connect_env}
    draft = {"transport": "stdio", "command": words[0], "args": list(words[1:])}
    if draft_env:
        draft["env"] = draft_env
    if any(not word.startswith("-") and "/" in word and not word.startswith("/") for word in words):
        notes.append(
            "The command line has relative paths: they resolve against the working directory of the worker that "
            "runs the action; use absolute paths or add server.cwd."
        )
    return connect, draft, notes


def _split_header(raw: str) -> tuple[str, str, str]:
    name, sep, value = raw.partition(":")
    if not sep or not name.strip() or not value.strip():
        raise CommandError(f"--header {raw!r} is not 'Name: value'.")
    return name.strip(), value.strip(), "MCP_" + _ENV_UNSAFE.sub("_", name.strip()).upper()


def _split_env(raw: str) -> tuple[str, str, str]:
    name, sep, value = raw.partition("=")
    if not sep or not _ENV_NAME.fullmatch(name):
        raise CommandError(f"--env {raw!r} is not NAME=VALUE.")
    return name, value, name


def _references(items: list[tuple[str, str, str]], kind: str) -> tuple[dict[str, Any], dict[str, Any], list[str]]:
    connect: dict[str, Any] = {}
    draft: dict[str, Any] = {}
    notes = []
    for name, value, variable in items:
        scheme, _, rest = value.partition(" ")
        prefix = f"{scheme} " if scheme.lower() in _SCHEMES and rest.strip() else ""
        secret = value[len(prefix) :].strip()
        if secret.startswith("env://"):
            reference: dict[str, Any] = {"secret_ref": secret}
            connect[name] = reference | ({"prefix": prefix} if prefix else {})
            draft[name] = connect[name]
            continue
        connect[name] = value
        draft[name] = {"secret_ref": f"env://{variable}"} | ({"prefix": prefix} if prefix else {})
        notes.append(
            f"The {kind} {name} given to the import is read from the environment variable {variable} of the worker "
            f"(secret_ref env://{variable}); set it there. Its value was not written to the draft."
        )
    return connect, draft, notes


# --- drafts -----------------------------------------------------------------------------------------------------


def _default_prefix(listing: ServerListing) -> str:
    return f"{_ID_UNSAFE.sub('_', listing.name)}." if listing.name else ""


def _drafts(
    listing: ServerListing,
    server: dict[str, Any],
    server_notes: list[str],
    prefix: str,
    version: str,
    source: str,
) -> list[dict[str, Any]]:
    drafts = []
    seen: set[str] = set()
    for tool in listing.tools:
        action_id = _action_id(prefix, tool.name, seen)
        drafts.append(draft_contract(tool, server, action_id=action_id, version=version, domain=listing.name or "mcp"))
        drafts[-1]["review"]["source"] = f"{source}, tool {tool.name}"
        drafts[-1]["review"]["notes"] += server_notes
    return drafts


def _action_id(prefix: str, tool_name: str, seen: set[str]) -> str:
    base = _ID_UNSAFE.sub("_", f"{prefix}{tool_name}")
    if not base[:1].isalpha():
        base = f"mcp.{base}"
    action_id, n = base, 1
    while action_id in seen:
        n += 1
        action_id = f"{base}_{n}"
    seen.add(action_id)
    return action_id


def draft_contract(tool: Tool, server: dict[str, Any], *, action_id: str, version: str, domain: str) -> dict[str, Any]:
    """One inactive draft contract for a tool, with the reversibility proposal and why in review.notes."""
    reversibility, risk, idempotent, notes = _proposal(tool)
    operation, resource = _operation_and_resource(tool.name)
    contract: dict[str, Any] = {
        "id": action_id,
        "version": version,
        "kind": "mcp",
        "active": False,
        "description": _clip(tool.description or tool.title or f"MCP tool {tool.name}"),
        "semantic": {
            "domain": domain,
            "operation": operation,
            "resource": resource,
            "risk": risk,
            "reversibility": reversibility,
        },
        "input_schema": _schema_or_object(tool.input_schema, notes, "inputSchema"),
    }
    if tool.output_schema:
        wrapped = {"type": "object", "required": ["result"], "properties": {"result": tool.output_schema}}
        if _valid_schema(wrapped):
            contract["output_schema"] = wrapped
            notes.append("output_schema is the tool's outputSchema inside the receipt envelope ({tool, result}).")
    contract |= {
        "execution_policy": {"idempotent": idempotent},
        "server": server,
        "forward": {"tool": tool.name, "arguments": "${input}"},
        "review": {"draft": True, "source": "", "notes": notes},
    }
    notes.append(
        f"semantic.domain/operation/resource ({domain}/{operation}/{resource}) come from the server and tool names; "
        "adjust them to what governance rules should match."
    )
    return contract


def _proposal(tool: Tool) -> tuple[str, str, bool, list[str]]:
    """(reversibility, risk, idempotent, notes): the first note explains the reversibility proposal."""
    hints = tool.annotations
    read_only = hints.read_only_hint if hints else None
    destructive = hints.destructive_hint if hints else None
    idempotent_hint = hints.idempotent_hint if hints else None
    open_world = hints.open_world_hint if hints else None
    annotations = (
        f"MCP annotations: readOnlyHint={_hint(read_only)}, destructiveHint={_hint(destructive)}, "
        f"idempotentHint={_hint(idempotent_hint)}, openWorldHint={_hint(open_world)} (hints from the server, "
        "not guarantees)."
    )
    if read_only is True:
        return (
            "read_only",
            "low",
            True,
            [
                "read_only: readOnlyHint is true, so the tool changes nothing and needs no compensation.",
                "execution_policy.idempotent is true: a read is safe to repeat.",
                annotations,
            ],
        )
    if destructive is False:
        first = (
            "unknown: destructiveHint is false (per its annotations the tool only makes additive updates), so it "
            "can become reversible, but reversible means the inverse is known and an import has no compensation. "
            "Add one (for a create, the tool that deletes what it created, with ${result.id}; for an update, the "
            "same tool with the prior values read by a capture, ${pre_state.x}), then mark it 'reversible'."
        )
        risk = "medium"
    else:
        said = "true" if destructive is True else "not declared (MCP's default is true)"
        first = (
            f"unknown: destructiveHint is {said}, so the tool may overwrite or delete data. If another tool can "
            "undo it, add that as compensation (a capture read can record the prior state for ${pre_state.x}) and "
            "mark it 'compensable' or 'reversible'; if nothing can, mark it 'irreversible' and consider "
            "execution_policy.approval_required."
        )
        risk = "high"
    idempotent = idempotent_hint is True
    second = (
        "execution_policy.idempotent is true (idempotentHint): a repeated call has no further effect, so a call "
        "whose outcome is uncertain is retried."
        if idempotent
        else "execution_policy.idempotent is false (idempotentHint is not true): a call whose outcome is uncertain "
        "is not retried automatically."
    )
    return "unknown", risk, idempotent, [first, second, annotations]


def _summary(contract: dict[str, Any]) -> str:
    """One progress line: the proposal and the annotation it came from."""
    reversibility = contract["semantic"]["reversibility"]
    first_note: str = contract["review"]["notes"][0]
    if reversibility == "read_only":
        why = "readOnlyHint"
    elif "destructiveHint is false" in first_note:
        why = "additive: add a compensation, then mark it reversible"
    else:
        why = "may be destructive: mark it irreversible, or add a compensation"
    idempotent = ", idempotent" if contract["execution_policy"]["idempotent"] else ""
    return f"{reversibility}{idempotent} ({why})"


def _hint(value: bool | None) -> str:
    return "unset" if value is None else str(value).lower()


def _operation_and_resource(tool_name: str) -> tuple[str, str]:
    """create_contact -> (create, contact); a name without a separator is both."""
    verb, _, rest = re.sub(r"[.\-/]", "_", tool_name).partition("_")
    return (verb or tool_name), (rest or tool_name)


def _schema_or_object(schema: Any, notes: list[str], what: str) -> dict[str, Any]:
    if isinstance(schema, dict) and _valid_schema(schema):
        return schema
    notes.append(f'The tool\'s {what} is not a valid JSON Schema (draft 2020-12); replaced by {{"type": "object"}}.')
    return {"type": "object"}


def _valid_schema(schema: dict[str, Any]) -> bool:
    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError:
        return False
    return True


def _clip(text: str) -> str:
    return text if len(text) <= _DESCRIPTION_LIMIT else text[: _DESCRIPTION_LIMIT - 3] + "..."
