"""Compensation packs: hand-written JSON files declaring, per downstream MCP tool, the call that undoes it.

The format is Sagaz's, so its packs load unchanged:

    {"name": "demo-crm", "description": "what the pack covers",
     "entries": [{"tool": "delete_contact",                 # a name or a glob (`*`, `?`); optional "server"
                  "note": "why this is the inverse",          # optional, for humans
                  "capture": {"tool": "get_contact", "args": {"id": "$.args.id"}},
                  "inverse": {"tool": "create_contact", "args": {"name": "$.pre_state.name"}}}]}

Every argument value is a reference: `$.args.x` (the call's arguments), `$.result.x` (its answer: the
structuredContent, else its first text block parsed as JSON), `$.pre_state.x` (the capture read's answer, read the
same way). `capture` runs after the gate and before the call, so its arguments can only read `$.args`; an inverse
that reads `$.pre_state` needs a capture. Validation is strict (an unknown key is a typo, not an extension) and
names each problem's path; two entries for one (server, tool) is an error, because an undo must not have to choose.

Lookup (`PackSet.inverse_for`): the most specific matching entry wins, an exact tool name before a glob, then an
entry naming the server before one for any server; two equally specific matches are refused.

The same declaration as a `kind: mcp` contract (`PackEntry.as_mcp_contract_parts`): `$.args.x` is `${input.x}`,
`$.result.x` is `${result.x}`, `$.pre_state.x` is `${pre_state.x}`; `capture` becomes the contract's `capture`
(`tool`, `arguments`) and `inverse` its `compensation`. One difference: a contract's `${result...}` reads what the
MCP action stored (structuredContent, or the content blocks), while a pack's `$.result` also parses a text answer
as JSON; for a tool answering structuredContent both read the same value.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any

from registry.errors import ActionFailure, RegistryError
from registry.strict_json import StrictJsonError, read_strict_json

_IDENT = re.compile(r"[A-Za-z0-9_-]+")
_REFERENCE = re.compile(r"\$\.(?P<root>args|result|pre_state)(?P<path>(?:\.[A-Za-z0-9_-]+)*)")
_CAPTURE_ROOTS = ("args",)
_INVERSE_ROOTS = ("args", "result", "pre_state")
_TEMPLATE_ROOTS = {"args": "input", "result": "result", "pre_state": "pre_state"}
_PACK_KEYS = {"name", "description", "entries"}
_ENTRY_KEYS = {"tool", "server", "capture", "inverse", "note"}
_CALL_KEYS = {"tool", "args"}
_GLOB_CHARACTERS = frozenset("*?[")


class PackError(RegistryError):
    """A compensation pack does not validate, or two packs claim one tool. `problems` lists every finding."""

    def __init__(self, problems: Sequence[str]) -> None:
        listed = "\n".join(f"  - {problem}" for problem in problems)
        super().__init__(
            "INVALID_COMPENSATION_PACK",
            f"Compensation packs are invalid; none was loaded. Fix these problems:\n{listed}",
            list(problems),
        )


@dataclass(frozen=True)
class PackCall:
    """A tool call of a pack entry: the tool (on the same server) and its arguments as `$.` references."""

    tool: str
    args: Mapping[str, str]


@dataclass(frozen=True)
class PackEntry:
    pack: str  # the pack's name
    source: str  # where it was declared: "examples/demo_pack.json entries[1]"
    tool: str
    inverse: PackCall
    server: str = ""
    capture: PackCall | None = None
    note: str = ""

    def covers(self, server: str, tool: str) -> bool:
        return self.server in ("", server) and fnmatchcase(tool, self.tool)

    def capture_arguments(self, args: Mapping[str, Any]) -> dict[str, Any]:
        """The capture read's arguments for a call made with `args`. The entry must have a capture."""
        if self.capture is None:
            raise ValueError(f"{self.source} declares no capture")
        return render_references(self.capture.args, {"args": args}, f"{self.source}.capture.args")

    def inverse_arguments(self, args: Mapping[str, Any], result: Any, pre_state: Any | None = None) -> dict[str, Any]:
        """The inverse call's arguments; `result` and `pre_state` are payloads (see tool_result_payload).
        ActionFailure(PACK_REFERENCE_MISSING), permanent, when a reference cannot be resolved."""
        scope: dict[str, Any] = {"args": args, "result": result}
        if self.capture is not None:
            scope["pre_state"] = pre_state
        return render_references(self.inverse.args, scope, f"{self.source}.inverse.args")

    def as_mcp_contract_parts(self) -> dict[str, Any]:
        """The `compensation` (and `capture`) of an equivalent `kind: mcp` contract (mapping in the docstring)."""
        parts: dict[str, Any] = {"compensation": _as_contract_call(self.inverse)}
        if self.capture is not None:
            parts["capture"] = _as_contract_call(self.capture)
        return parts

    def _rank(self) -> tuple[bool, bool]:
        return (not _is_glob(self.tool), bool(self.server))


@dataclass(frozen=True)
class Pack:
    name: str
    description: str
    entries: tuple[PackEntry, ...]
    source: str


@dataclass(frozen=True)
class PackSet:
    packs: tuple[Pack, ...] = ()

    @property
    def entries(self) -> tuple[PackEntry, ...]:
        return tuple(entry for pack in self.packs for entry in pack.entries)

    def inverse_for(self, server: str, tool: str) -> PackEntry | None:
        """The entry declaring the inverse of `tool` on `server`, or None. PackError when two entries tie."""
        best = self._best(server, tool)
        if len(best) > 1:
            raise PackError([_tie_problem(server, tool, best)])
        return best[0] if best else None

    def conflicts(self, server: str, tools: Iterable[str]) -> list[str]:
        """A problem per tool of `server` that two equally specific entries claim (check this at start-up)."""
        problems = []
        for tool in tools:
            best = self._best(server, tool)
            if len(best) > 1:
                problems.append(_tie_problem(server, tool, best))
        return problems

    def uncovered(self, server: str, tools: Iterable[str]) -> list[str]:
        """The tools of `server` no entry covers, in the order given."""
        return [tool for tool in tools if not any(entry.covers(server, tool) for entry in self.entries)]

    def in_force(self, *, capture_enabled: bool) -> PackSet:
        """The packs as they apply: with captures switched off (`"capture": false`) an entry that needs a capture
        cannot run its inverse, so only capture-less entries remain (and only those may make a tool R)."""
        if capture_enabled:
            return self
        return PackSet(
            tuple(
                Pack(pack.name, pack.description, tuple(e for e in pack.entries if e.capture is None), pack.source)
                for pack in self.packs
            )
        )

    def _best(self, server: str, tool: str) -> list[PackEntry]:
        matching = [entry for entry in self.entries if entry.covers(server, tool)]
        if not matching:
            return []
        top = max(entry._rank() for entry in matching)
        return [entry for entry in matching if entry._rank() == top]


# --- loading and validation -------------------------------------------------------------------------------------


def load_packs(paths: Iterable[str | os.PathLike[str]], inline: Iterable[tuple[str, Any]] = ()) -> PackSet:
    """Every pack file of `paths` plus the `(source, document)` pairs of `inline`, all valid, or PackError listing
    every problem of every pack. Nothing is partially loaded."""
    documents: list[tuple[str, Any]] = []
    problems: list[str] = []
    for path in paths:
        try:
            documents.append((str(path), read_strict_json(path, "compensation pack")))
        except StrictJsonError as exc:
            problems.append(str(exc))
    documents += list(inline)
    packs = []
    for source, document in documents:
        found = pack_problems(document, source)
        problems += found
        if not found:
            packs.append(_build_pack(document, source))
    problems += _duplicate_problems(packs)
    if problems:
        raise PackError(problems)
    return PackSet(tuple(packs))


def parse_pack(document: Any, source: str) -> Pack:
    """One pack, valid, or PackError naming every problem as `source: path: ...`."""
    problems = pack_problems(document, source)
    if problems:
        raise PackError(problems)
    return _build_pack(document, source)


def pack_problems(document: Any, source: str) -> list[str]:
    """Every validation finding of one pack document, each prefixed with `source` and the JSON path."""
    if not isinstance(document, dict):
        return [f"{source}: a compensation pack is a JSON object with name, description and entries"]
    problems = _key_problems(document, _PACK_KEYS, {"name", "description", "entries"}, source)
    name = document.get("name")
    if "name" in document and not (isinstance(name, str) and _IDENT.fullmatch(name)):
        problems.append(f"{source}: name: {name!r} is not a pack name (letters, digits, '_' or '-')")
    description = document.get("description")
    if "description" in document and not (isinstance(description, str) and description.strip()):
        problems.append(f"{source}: description: one non-empty line saying what the pack covers")
    entries = document.get("entries")
    if "entries" in document and not (isinstance(entries, list) and entries):
        problems.append(f"{source}: entries: a list of at least one entry")
    elif isinstance(entries, list):
        for index, entry in enumerate(entries):
            problems += _entry_problems(entry, f"{source}: entries[{index}]")
    return problems


def _entry_problems(entry: Any, where: str) -> list[str]:
    if not isinstance(entry, dict):
        return [f"{where}: an entry is an object with tool and inverse (server, capture and note optional)"]
    problems = _key_problems(entry, _ENTRY_KEYS, {"tool", "inverse"}, where)
    if "tool" in entry and not _is_tool_name(entry["tool"]):
        problems.append(f"{where}.tool: the tool to match: a non-empty name or glob (* any run of characters)")
    if "server" in entry and not (isinstance(entry["server"], str) and _IDENT.fullmatch(entry["server"])):
        problems.append(f"{where}.server: {entry['server']!r} is not a server name of the proxy configuration")
    if "note" in entry and not (isinstance(entry["note"], str) and entry["note"].strip()):
        problems.append(f"{where}.note: when present, a non-empty note")
    if "capture" in entry:
        problems += _call_problems(entry["capture"], f"{where}.capture", _CAPTURE_ROOTS)
    if "inverse" in entry:
        problems += _call_problems(entry["inverse"], f"{where}.inverse", _INVERSE_ROOTS)
        problems += _pre_state_problems(entry, where)
    return problems


def _call_problems(call: Any, where: str, roots: tuple[str, ...]) -> list[str]:
    if not isinstance(call, dict):
        return [f"{where}: an object with tool and args"]
    problems = _key_problems(call, _CALL_KEYS, _CALL_KEYS, where)
    if "tool" in call and not _is_tool_name(call["tool"]):
        problems.append(f"{where}.tool: a non-empty tool name of the same server")
    args = call.get("args")
    if "args" in call and not isinstance(args, dict):
        problems.append(f"{where}.args: an object mapping each argument name to a $. reference")
    elif isinstance(args, dict):
        problems += [
            f"{where}.args.{key}: {problem}" for key, ref in args.items() if (problem := _reference_problem(ref, roots))
        ]
    return problems


def _reference_problem(ref: Any, roots: tuple[str, ...]) -> str | None:
    allowed = " or ".join(f"$.{root}.x" for root in roots)
    match = _REFERENCE.fullmatch(ref) if isinstance(ref, str) else None
    if match is None:
        return f"{ref!r} is not a reference; expected {allowed} (segments of letters, digits, '_' or '-')"
    if match["root"] not in roots:
        if roots == _CAPTURE_ROOTS:
            return f"{ref!r} reads $.{match['root']}, which does not exist before the call runs; use $.args.x"
        return f"{ref!r} reads $.{match['root']}, which does not exist here; use {allowed}"
    return None


def _pre_state_problems(entry: dict[str, Any], where: str) -> list[str]:
    inverse = entry.get("inverse")
    args = inverse.get("args") if isinstance(inverse, dict) else None
    if "capture" in entry or not isinstance(args, dict):
        return []
    return [
        f"{where}.inverse.args.{key}: reads $.pre_state but the entry declares no capture, so nothing would ever be "
        "captured; add a capture read, or map from $.args / $.result"
        for key, ref in args.items()
        if isinstance(ref, str) and ref.startswith("$.pre_state")
    ]


def _key_problems(value: dict[str, Any], known: set[str], required: set[str], where: str) -> list[str]:
    problems = [f"{where}: {key!r} is missing" for key in sorted(required - value.keys())]
    problems += [
        f"{where}: unknown key {key!r} (a typo? the keys are {', '.join(sorted(known))})"
        for key in sorted(value.keys() - known)
    ]
    return problems


def _duplicate_problems(packs: Sequence[Pack]) -> list[str]:
    problems = []
    by_name: dict[str, Pack] = {}
    for pack in packs:
        if pack.name in by_name:
            problems.append(
                f"{pack.source}: name: the pack name {pack.name!r} is already used by {by_name[pack.name].source}; "
                "rename one of them"
            )
        by_name.setdefault(pack.name, pack)
    seen: dict[tuple[str, str], PackEntry] = {}
    for entry in (entry for pack in packs for entry in pack.entries):
        first = seen.setdefault((entry.server, entry.tool), entry)
        if first is not entry:
            scope = f" on server {entry.server!r}" if entry.server else ""
            problems.append(
                f"{entry.source}: a second compensation for tool {entry.tool!r}{scope}; {first.source} already "
                "declares one. Keep one of them: an undo must not have to choose between two inverses"
            )
    return problems


def _build_pack(document: dict[str, Any], source: str) -> Pack:
    entries = tuple(
        PackEntry(
            pack=document["name"],
            source=f"{source} entries[{index}]",
            tool=raw["tool"],
            inverse=_build_call(raw["inverse"]),
            server=raw.get("server", ""),
            capture=_build_call(raw["capture"]) if "capture" in raw else None,
            note=raw.get("note", ""),
        )
        for index, raw in enumerate(document["entries"])
    )
    return Pack(document["name"], document["description"], entries, source)


def _build_call(raw: dict[str, Any]) -> PackCall:
    return PackCall(tool=raw["tool"], args=dict(raw["args"]))


def _is_tool_name(value: Any) -> bool:
    return isinstance(value, str) and bool(value.strip()) and value == value.strip()


def _is_glob(pattern: str) -> bool:
    return not _GLOB_CHARACTERS.isdisjoint(pattern)


def _tie_problem(server: str, tool: str, entries: Sequence[PackEntry]) -> str:
    sources = ", ".join(entry.source for entry in entries)
    return (
        f"tool {tool!r} on server {server!r} is covered by {len(entries)} equally specific compensation pack "
        f"entries ({sources}); an undo must not have to choose: narrow one (an exact tool name or a server)"
    )


# --- rendering --------------------------------------------------------------------------------------------------


def tool_result_payload(result: Mapping[str, Any]) -> Any:
    """What `$.result` / `$.pre_state` read in a tools/call answer (wire form): its structuredContent, else its
    first text block parsed as JSON, else None."""
    if result.get("structuredContent") is not None:
        return result["structuredContent"]
    content = result.get("content")
    text = next(
        (block.get("text") for block in content or () if isinstance(block, dict) and block.get("type") == "text"),
        None,
    )
    if not isinstance(text, str):
        return None
    try:
        return json.loads(text)
    except ValueError:
        return None


def render_references(mapping: Mapping[str, str], scope: Mapping[str, Any], where: str) -> dict[str, Any]:
    """`mapping` with each `$.root.path` replaced by the value it names in `scope` (keys args, result, pre_state).
    `null` is a value (clearing a field must be undoable); a missing root or path is a permanent ActionFailure."""
    rendered = {}
    for key, ref in mapping.items():
        match = _REFERENCE.fullmatch(ref)
        if match is None:
            raise _missing(f"{where}.{key}", ref, "it is not a $. reference")
        rendered[key] = _resolve(match, scope, f"{where}.{key}")
    return rendered


def _resolve(match: re.Match[str], scope: Mapping[str, Any], where: str) -> Any:
    ref, root = match[0], match["root"]
    if root not in scope:
        what = "no pre-state was captured for this call" if root == "pre_state" else f"there is no {root}"
        raise _missing(where, ref, what)
    current = scope[root]
    walked = f"$.{root}"
    for segment in match["path"].split(".")[1:]:
        if isinstance(current, Mapping) and segment in current:
            current = current[segment]
        elif isinstance(current, list) and segment.isdigit() and int(segment) < len(current):
            current = current[int(segment)]
        else:
            kind = "null" if current is None else f"a {type(current).__name__}"
            raise _missing(where, ref, f"{walked} has no {segment!r} (it is {kind})")
        walked += f".{segment}"
    return current


def _missing(where: str, ref: str, detail: str) -> ActionFailure:
    return ActionFailure(
        "PACK_REFERENCE_MISSING",
        f"{where}: {ref} cannot be resolved: {detail}. The inverse was not run. The call's arguments, result or "
        "captured pre-state lack a value this compensation pack entry needs, so retrying will not help: fix the "
        "pack entry, or undo this step by hand.",
        retryable=False,
    )


def _as_contract_call(call: PackCall) -> dict[str, Any]:
    arguments = {}
    for key, ref in call.args.items():
        match = _REFERENCE.fullmatch(ref)
        if match is None:  # validated packs only hold references
            raise ValueError(f"{ref!r} is not a $. reference")
        arguments[key] = "${" + _TEMPLATE_ROOTS[match["root"]] + match["path"] + "}"
    return {"tool": call.tool, "arguments": arguments}
