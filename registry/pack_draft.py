"""Drafting a compensation pack from what a server lists (`semantic-saga packs draft`): the pairs a name shows
(`create_x` undone by `delete_x`, `add_x` by `remove_x`; `delete_x` by `create_x` from a capture read `get_x`;
`update_x` by itself from that capture), each argument mapped from the tools' schemas, and every tool it cannot pair.

A draft is a starting point for an operator, never a pack to trust as it is: each entry's note says what was
guessed. It validates as a pack (registry.pack_validation), so it loads once an operator has checked it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from registry.tool_classes import classify, name_words

CREATE_VERBS = ("create", "add", "insert", "new")
DELETE_VERBS = ("delete", "remove")
UPDATE_VERBS = ("update", "edit", "set")
READ_VERBS = ("get", "read", "open", "fetch")
_ID_NAME = re.compile(r"^(id|.*_id|.*Id)$")


@dataclass(frozen=True)
class Tool:
    name: str
    inputs: Mapping[str, Any]  # inputSchema.properties
    required: tuple[str, ...]
    outputs: Mapping[str, Any]  # outputSchema.properties ({} without an output schema)
    annotations: Mapping[str, Any] | None = None

    @classmethod
    def listed(cls, tool: Mapping[str, Any]) -> Tool:
        schema = tool.get("inputSchema") or {}
        output = tool.get("outputSchema") or {}
        return cls(
            name=str(tool["name"]),
            inputs=dict(schema.get("properties") or {}),
            required=tuple(schema.get("required") or ()),
            outputs=dict(output.get("properties") or {}),
            annotations=tool.get("annotations"),
        )


@dataclass
class Draft:
    pack: dict[str, Any]
    unpaired: list[tuple[str, str, str]] = field(default_factory=list)  # (tool, class, why)


def draft_pack(server: str, tools: Sequence[Mapping[str, Any]]) -> Draft:
    """The draft pack for `server`'s `tools` (as tools/list answers them, in wire form)."""
    listed = {tool.name: tool for tool in map(Tool.listed, tools)}
    entries: list[dict[str, Any]] = []
    unpaired: list[tuple[str, str, str]] = []
    for tool in listed.values():
        found = classify(tool.name, server, tool.annotations, [], False)
        if found.effect_class == "read":
            continue
        entry = _entry(tool, listed)
        if entry is None:
            unpaired.append((tool.name, found.effect_class, found.reason))
        else:
            entries.append(entry)
    description = f"DRAFT for server {server!r}: check every entry against the server before trusting it."
    return Draft({"name": f"{server}-draft", "description": description, "entries": entries}, unpaired)


def _entry(tool: Tool, listed: Mapping[str, Tool]) -> dict[str, Any] | None:
    verb, noun = _verb_and_noun(tool.name)
    if verb in CREATE_VERBS:
        inverse = _sibling(tool.name, verb, noun, DELETE_VERBS, listed)
        if inverse is not None:
            args = {key: _from_answer(key, tool, inverse) for key in inverse.required}
            guessed = [k for k, ref in args.items() if ref == f"$.result.{k}" and k not in tool.outputs]
            if guessed and tool.outputs and not all(_ID_NAME.match(k) for k in guessed):
                return None  # its answer's schema says it does not carry what the inverse needs: not a pair
            return _drafted(tool, {"tool": inverse.name, "args": args}, None, guessed)
    if verb in DELETE_VERBS:
        create = _sibling(tool.name, verb, noun, CREATE_VERBS, listed)
        read = _sibling(tool.name, verb, noun, READ_VERBS, listed)
        if create is not None and read is not None:
            kept = [key for key in create.inputs if key in create.required or _ID_NAME.match(key)]
            return _drafted(tool, {"tool": create.name, "args": {k: f"$.pre_state.{k}" for k in kept}}, read)
    if verb in UPDATE_VERBS:
        read = _sibling(tool.name, verb, noun, READ_VERBS, listed)
        if read is not None:
            args = {k: (f"$.args.{k}" if k in read.required else f"$.pre_state.{k}") for k in tool.inputs}
            return _drafted(tool, {"tool": tool.name, "args": args}, read)
    return None


def _drafted(tool: Tool, inverse: dict[str, Any], read: Tool | None, guessed: Sequence[str] = ()) -> dict[str, Any]:
    entry: dict[str, Any] = {"tool": tool.name}
    if read is not None:
        entry["capture"] = {"tool": read.name, "args": {key: f"$.args.{key}" for key in read.required}}
    entry["inverse"] = inverse
    how = f"reads the state with {read.name} first and writes it back" if read else "undoes what its answer names"
    unsure = f" (guessed, no schema says: {', '.join(guessed)})" if guessed else ""
    entry["note"] = f"DRAFTED from the names and schemas: {inverse['tool']} {how}; check each argument{unsure}."
    return entry


def _from_answer(key: str, forward: Tool, inverse: Tool) -> str:
    """Where the inverse's argument `key` comes from: the forward answer's field, a list of the names or ids its
    answer lists, a server-assigned id, else the forward call's own argument."""
    if key in forward.outputs:
        return f"$.result.{key}"
    for listed, schema in forward.outputs.items():
        items = (schema.get("items") or {}).get("properties") or {} if isinstance(schema, Mapping) else {}
        for field_name in ("name", "id"):
            if field_name in items and key.lower().endswith(field_name + "s"):
                return f"$.result.{listed}[*].{field_name}"
    if _ID_NAME.match(key) and key not in forward.required:
        return f"$.result.{key}"
    return f"$.args.{key}" if key in forward.inputs else f"$.result.{key}"


def _verb_and_noun(tool_name: str) -> tuple[str, str]:
    words = name_words(tool_name)
    return (words[0], "_".join(words[1:])) if words else ("", "")


def _sibling(name: str, verb: str, noun: str, verbs: Sequence[str], listed: Mapping[str, Tool]) -> Tool | None:
    """The tool named like `name` with another verb (same separator and case): delete_contact for create_contact."""
    for other in verbs:
        for candidate in (name.replace(verb, other, 1), f"{other}_{noun}"):
            if candidate in listed and candidate != name:
                return listed[candidate]
    return None
