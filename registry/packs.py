"""Compensation packs: hand-written JSON files declaring, per downstream MCP tool, the call that undoes it.

The format is Sagaz's, so its packs load unchanged:

    {"name": "demo-crm", "description": "what the pack covers",
     "entries": [{"tool": "delete_contact",                 # a name or a glob (`*`, `?`); optional "server"
                  "note": "why this is the inverse",          # optional, for humans
                  "capture": {"tool": "get_contact", "args": {"id": "$.args.id"}},
                  "inverse": {"tool": "create_contact", "args": {"name": "$.pre_state.name"}}}]}

Every argument value is a reference: `$.args.x` (the call's arguments), `$.result.x` (its answer's payload: the
structuredContent, else its first text block parsed as JSON, registry.tool_answers), `$.pre_state.x` (the capture
read's payload, read the same way). Beyond Sagaz (whose packs load unchanged): a path segment ending in `[*]` reads
every item of a list (`$.result.entities[*].name`: the inverse gets the list of names), `{"const": value}` is a
value of its own (any JSON, never a template), and `{"jmespath": "<expression>"}` builds a value with a JMESPath
expression over `{"args", "result", "pre_state"}` (`result[*].{name: entityName}`: a renaming per item;
registry.jmespath_values). An entry may also say a tool has no inverse and why:
`{"tool": "git_commit", "class": "I", "reason": "a commit is published history"}` (class C or I): the proxy then
classes the tool so (below explicit rules, above its own guesses) with the pack's reason. `capture` runs after the gate
and before the call, so its arguments can only read `$.args`; an inverse that reads `$.pre_state` needs a capture.
A capture may say how to read its outcome (`notFound`: a pattern over an error's text; `textPattern`: named groups of
a prose answer; `readAfter`: read again after the call, for the undo's drift check), and `ifNotFound` (not found),
`ifNoMatch` (its text did not match textPattern; without it, ifNotFound answers that too) and `ifCaptureFailed`
answer those outcomes with another call or no inverse (registry.capture_outcomes).
Validation is strict (an unknown key is a typo, not an extension) and names each problem's path; two entries for one
(server, tool) is an error, because an undo must not have to choose.

Lookup (`PackSet.inverse_for`): the most specific matching entry wins, an exact tool name before a glob, then an
entry naming the server before one for any server; two equally specific matches are refused.

A pack is an input format: each entry is parsed once into the registry's own compensation and capture
(`PackEntry.as_mcp_contract_parts`, a `kind: mcp` contract's `compensation` and `capture`): `$.args.x` is
`${input.x}`, `$.result.x` is `${result.x}`, `$.pre_state.x` is `${pre_state.x}`, and `{"jmespath": E}` is
`{"$jmespath": E}` over the contract's roots, where `args` is `input`: an expression that reads `args` is given that
name first, `{"$jmespath": "{args: input} | (E)"}`. Those are rendered by the
registry's templating (registry.compensation_plan) like any contract's, from the envelope the call's step keeps,
whose `result` and `pre_state` are payloads by the same rule as the pack's.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from typing import Any

from registry import jmespath_values
from registry.errors import RegistryError
from registry.pack_validation import BRANCHES, CONST, JMESPATH, REFERENCE, TEMPLATE_ROOTS, pack_problems
from registry.strict_json import StrictJsonError, read_strict_json

_GLOB_CHARACTERS = frozenset("*?[")
# How a reason names the capture outcome a branch answers.
_WHEN = {
    "ifNotFound": "the capture finds nothing",
    "ifNoMatch": "the capture's text does not match its pattern",
    "ifCaptureFailed": "the capture read fails",
}
# A pack capture's outcome keys, in the contract's words (registry.capture_outcomes).
CAPTURE_READING = {"notFound": "absent_when", "textPattern": "text_pattern", "readAfter": "read_after"}


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
    args: Mapping[str, Any]  # a `$.` reference string, {"const": value} or {"jmespath": "<expression>"}


@dataclass(frozen=True)
class PackNoInverse:
    """A branch saying that, in its capture outcome, the call has no inverse: class C or I, and why."""

    effect_class: str
    reason: str


@dataclass(frozen=True)
class PackEntry:
    pack: str  # the pack's name
    source: str  # where it was declared: "examples/demo_pack.json entries[1]"
    tool: str
    inverse: PackCall
    server: str = ""
    capture: PackCall | None = None
    note: str = ""
    # How to read the capture's outcome: notFound, textPattern, readAfter (registry.capture_outcomes).
    capture_reading: Mapping[str, Any] = field(default_factory=dict)
    # ifNotFound / ifNoMatch / ifCaptureFailed: another inverse, or none.
    branches: Mapping[str, PackCall | PackNoInverse] = field(default_factory=dict)
    # An entry without a capture (a create) may read what the call made right after it: {"tool", "args",
    # "textPattern"}, its args reading $.args and $.result; the undo's drift check expects that state.
    read_after: Mapping[str, Any] | None = None

    def guarded_class(self) -> tuple[str, str] | None:
        """The class a call gets before its capture runs when a branch has no inverse (the more guarded one, I
        before C), and why (each such branch's reason, named by its outcome); None when every outcome has an inverse
        (the call is R)."""
        none = [(key, branch) for key, branch in self.branches.items() if isinstance(branch, PackNoInverse)]
        if not none:
            return None
        worst = "I" if any(branch.effect_class == "I" for _, branch in none) else "C"
        said = "; ".join(
            f"{'nor' if index else 'no inverse'} when {_WHEN[key]}: {branch.reason.strip()}"
            for index, (key, branch) in enumerate(none)
        )
        return worst, f"{said}; otherwise {self.inverse.tool}"

    def covers(self, server: str, tool: str) -> bool:
        return self.server in ("", server) and fnmatchcase(tool, self.tool)

    def needs(self) -> tuple[str, ...]:
        """The tools of the same server this entry calls: its capture read's (if any), then its inverse's."""
        calls = [branch.tool for branch in self.branches.values() if isinstance(branch, PackCall)]
        after = self.capture_reading.get("readAfter") if self.capture else self.read_after
        reads = [str(after["tool"])] if isinstance(after, Mapping) else []
        return (*((self.capture.tool,) if self.capture else ()), *reads, self.inverse.tool, *calls)

    def missing_on(self, offered: Collection[str]) -> list[str]:
        """The tools this entry calls that a server offering `offered` does not have."""
        return [tool for tool in self.needs() if tool not in offered]

    def as_mcp_contract_parts(self) -> dict[str, Any]:
        """The `compensation` (and `capture`) of an equivalent `kind: mcp` contract (mapping in the docstring)."""
        parts: dict[str, Any] = {"compensation": _as_contract_call(self.inverse)}
        if self.capture is not None:
            parts["capture"] = {**_as_contract_call(self.capture), **self._capture_outcomes()}
        elif self.read_after is not None:
            read = _as_contract_call(PackCall(str(self.read_after["tool"]), dict(self.read_after.get("args", {}))))
            pattern = {"text_pattern": self.read_after["textPattern"]} if "textPattern" in self.read_after else {}
            parts["read_after"] = {**read, **pattern}
        return parts

    def _capture_outcomes(self) -> dict[str, Any]:
        """The capture's outcome fields in the contract's words (registry.capture_outcomes)."""
        fields: dict[str, Any] = {
            CAPTURE_READING[key]: value for key, value in self.capture_reading.items() if key in CAPTURE_READING
        }
        after = self.capture_reading.get("readAfter")
        if isinstance(after, Mapping):  # a read of its own: the contract's words
            read = _as_contract_call(PackCall(str(after["tool"]), dict(after.get("args", {}))))
            pattern = {"text_pattern": after["textPattern"]} if "textPattern" in after else {}
            fields["read_after"] = {**read, **pattern}
        for key, branch in self.branches.items():
            fields[BRANCHES[key]] = (
                _as_contract_call(branch)
                if isinstance(branch, PackCall)
                else {"class": branch.effect_class, "reason": branch.reason}
            )
        return fields

    def _rank(self) -> tuple[bool, bool]:
        return (not _is_glob(self.tool), bool(self.server))


@dataclass(frozen=True)
class PackDeclaration:
    """A tool the pack says has no inverse: class C (corrected afterwards) or I (no way back), and why."""

    pack: str
    source: str
    tool: str
    effect_class: str
    reason: str
    server: str = ""
    note: str = ""

    def covers(self, server: str, tool: str) -> bool:
        return self.server in ("", server) and fnmatchcase(tool, self.tool)

    def _rank(self) -> tuple[bool, bool]:
        return (not _is_glob(self.tool), bool(self.server))


@dataclass(frozen=True)
class Pack:
    name: str
    description: str
    entries: tuple[PackEntry, ...]
    source: str
    declarations: tuple[PackDeclaration, ...] = ()


@dataclass(frozen=True)
class PackSet:
    packs: tuple[Pack, ...] = ()

    @property
    def entries(self) -> tuple[PackEntry, ...]:
        return tuple(entry for pack in self.packs for entry in pack.entries)

    @property
    def declarations(self) -> tuple[PackDeclaration, ...]:
        return tuple(declared for pack in self.packs for declared in pack.declarations)

    def declared_for(self, server: str, tool: str) -> PackDeclaration | None:
        """The most specific declaration that `tool` on `server` has no inverse (an exact name before a glob, a
        server named before any), or None; None too when an inverse entry is more specific. PackError when two
        declarations tie."""
        matching = [declared for declared in self.declarations if declared.covers(server, tool)]
        if not matching:
            return None
        top = max(declared._rank() for declared in matching)
        best = [declared for declared in matching if declared._rank() == top]
        if len(best) > 1:
            raise PackError([_tie_problem(server, tool, best)])
        entries = self._best(server, tool)
        return best[0] if not entries or top >= entries[0]._rank() else None

    def usable_for(self, server: str, tool: str, offered: Collection[str] | None) -> PackEntry | None:
        """inverse_for, but None when the server (offering `offered`; None: not known yet) lacks a tool the entry
        calls: an inverse that cannot be called makes no call R and is never put in a step's contract."""
        entry = self.inverse_for(server, tool)
        if entry is not None and self.declared_for(server, tool) is not None:
            return None  # a declaration as specific or more says there is none: the more guarded reading wins
        if entry is None or offered is None or not entry.missing_on(offered):
            return entry
        return None

    def unusable(self, offered: Mapping[str, Collection[str]]) -> list[str]:
        """A warning per entry the connected servers (`offered`: server -> its tools) cannot use: no server offers a
        tool it matches, or the server that does lacks its capture or inverse tool. Down servers are left out."""
        warnings: list[str] = []
        for declared in self.declarations:
            servers = [declared.server] if declared.server else list(offered)
            known = [server for server in servers if server in offered]
            if known and not any(declared.covers(s, t) for s in known for t in offered[s]):
                warnings.append(_unmatched(declared))
        for entry in self.entries:
            if entry.server and entry.server not in offered:
                continue  # that server is down (or unknown): whether it offers the tool is not known
            servers = [entry.server] if entry.server else list(offered)
            matched = {server: [t for t in offered[server] if entry.covers(server, t)] for server in servers}
            if not any(matched.values()):
                warnings.append(_unmatched(entry))
            warnings += [
                _uncallable(entry, server, tools, missing)
                for server, tools in matched.items()
                if tools and (missing := entry.missing_on(offered[server]))
            ]
        return warnings

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
            try:
                self.declared_for(server, tool)
            except PackError as tie:
                problems += tie.problems
        return problems

    def uncovered(self, server: str, tools: Iterable[str]) -> list[str]:
        """The tools of `server` (all it offers, in the order given) that no usable entry covers: an entry whose
        capture or inverse tool the server lacks covers nothing."""
        offered = list(tools)
        return [tool for tool in offered if self.usable_for(server, tool, offered) is None]

    def in_force(self, *, capture_enabled: bool) -> PackSet:
        """The packs as they apply: with captures switched off (`"capture": false`) an entry that needs a capture
        cannot run its inverse, so only capture-less entries remain (and only those may make a tool R)."""
        if capture_enabled:
            return self
        return PackSet(
            tuple(
                Pack(
                    pack.name,
                    pack.description,
                    tuple(e for e in pack.entries if e.capture is None),
                    pack.source,
                    pack.declarations,
                )
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
    seen: dict[tuple[str, str], PackEntry | PackDeclaration] = {}
    claims: list[PackEntry | PackDeclaration] = []
    for pack in packs:
        claims += [*pack.entries, *pack.declarations]
    for entry in claims:
        first = seen.setdefault((entry.server, entry.tool), entry)
        if first is not entry:
            scope = f" on server {entry.server!r}" if entry.server else ""
            problems.append(
                f"{entry.source}: a second entry for tool {entry.tool!r}{scope}; {first.source} already covers it. "
                "Keep one of them: an undo must not have to choose between two answers for one tool"
            )
    return problems


def _build_pack(document: dict[str, Any], source: str) -> Pack:
    name, raws = document["name"], list(enumerate(document["entries"]))
    entries = tuple(
        PackEntry(
            pack=name,
            source=f"{source} entries[{index}]",
            tool=raw["tool"],
            inverse=_build_call(raw["inverse"]),
            server=raw.get("server", ""),
            capture=_build_call(raw["capture"]) if "capture" in raw else None,
            note=raw.get("note", ""),
            capture_reading={k: v for k, v in raw.get("capture", {}).items() if k in CAPTURE_READING},
            branches={key: _build_branch(raw[key]) for key in BRANCHES if key in raw},
            read_after=dict(raw["readAfter"]) if isinstance(raw.get("readAfter"), dict) else None,
        )
        for index, raw in raws
        if "inverse" in raw
    )
    declarations = tuple(
        PackDeclaration(
            pack=name,
            source=f"{source} entries[{index}]",
            tool=raw["tool"],
            effect_class=raw["class"],
            reason=raw["reason"].strip(),
            server=raw.get("server", ""),
            note=raw.get("note", ""),
        )
        for index, raw in raws
        if "inverse" not in raw
    )
    return Pack(name, document["description"], entries, source, declarations)


def _build_call(raw: dict[str, Any]) -> PackCall:
    return PackCall(tool=raw["tool"], args=dict(raw["args"]))


def _build_branch(raw: dict[str, Any]) -> PackCall | PackNoInverse:
    if "tool" in raw:
        return _build_call(raw)
    return PackNoInverse(raw["class"], raw["reason"].strip())


def _unmatched(entry: PackEntry | PackDeclaration) -> str:
    where = f"server {entry.server!r} offers no tool" if entry.server else "no connected server offers a tool"
    return (
        f"{entry.source}: {where} matching {entry.tool!r}, so the entry is unused. Check the tool name (a typo?) "
        "or the server it names"
    )


def _uncallable(entry: PackEntry, server: str, tools: Sequence[str], missing: Sequence[str]) -> str:
    undone = ", ".join(tools[:3]) + (", ..." if len(tools) > 3 else "")
    return (
        f"{entry.source}: server {server!r} has no tool {', '.join(map(repr, missing))}, which the entry calls to "
        f"undo {undone}; the entry gives those calls no inverse, so they cannot be undone by it. Fix the entry's "
        "capture or inverse tool"
    )


def _is_glob(pattern: str) -> bool:
    return not _GLOB_CHARACTERS.isdisjoint(pattern)


def _tie_problem(server: str, tool: str, entries: Sequence[PackEntry | PackDeclaration]) -> str:
    sources = ", ".join(entry.source for entry in entries)
    return (
        f"tool {tool!r} on server {server!r} is covered by {len(entries)} equally specific compensation pack "
        f"entries ({sources}); an undo must not have to choose: narrow one (an exact tool name or a server)"
    )


# --- as a contract ----------------------------------------------------------------------------------------------


def _as_contract_call(call: PackCall) -> dict[str, Any]:
    arguments: dict[str, Any] = {}
    for key, ref in call.args.items():
        if isinstance(ref, dict) and JMESPATH in ref:  # the contract's roots: args is input
            expression = jmespath_values.over_roots(ref[JMESPATH], TEMPLATE_ROOTS)
            arguments[key] = {jmespath_values.KEY: expression}
            continue
        if isinstance(ref, dict):  # {"const": value}: sent as it is
            arguments[key] = ref[CONST]
            continue
        match = REFERENCE.fullmatch(ref)
        if match is None:  # validated packs only hold references
            raise ValueError(f"{ref!r} is not a $. reference")
        arguments[key] = "${" + TEMPLATE_ROOTS[match["root"]] + match["path"] + "}"
    return {"tool": call.tool, "arguments": arguments}
