"""Reversibility classes of downstream MCP tools, decided before a proxied call runs, with the reason recorded.

A class says what an undo can do about a call, like a contract's `semantic.reversibility`:

    read      changes nothing; skipped by an undo, forwarded in preview
    R         reversible: a known inverse undoes it
    C         compensable: cannot be undone, only corrected afterwards (an email sent)
    I         irreversible: no way back (money moved)
    unknown   nothing decided; treated as a mutation everywhere (never forwarded in preview)

The cascade, first hit wins, and its level is recorded as `source`:

    rule                    the operator's rules (glob on the tool name, optional server), in file order
    declared_compensation   a compensation pack entry or a `kind: mcp` contract declares the inverse -> R
    annotation              `readOnlyHint: true` -> read, unless the name holds a mutating verb (below)
    heuristic               the first word of the tool name (table below)
    default                 nothing matched -> unknown

The governing rule: R means "we know how to run the inverse". Only a declared inverse (or the operator) says so; a
name or an annotation never proves reversibility, so no name heuristic answers R: a `create_*` without a pack entry
is `unknown` (its inverse would be deleting what the answer names, but nothing declares it), and the ledger, the
preview report, the gate and the undo plan all read that one class.

Annotations are the server's own claims, and a server is not trusted to lower its own guard: an annotation never
makes a call less guarded than its name. `readOnlyHint: true` on a tool whose name holds a mutating verb anywhere,
in any segment (`delete_all_users`, `purge_cache`, `users_delete`, `purge.cache`) does not make it a read: the name
decides, and a name-based read becomes unknown (`purge_cache` stays I, `send_report` C). `destructiveHint:
false` lowers nothing.
Only an operator rule says otherwise. (Sagaz lets `readOnlyHint` win over the name.)

Name heuristics look at the last segment of the name (after `.`, `/`, `:` or `__`), split into words at
camelCase, `_` and `-`. A read verb first does not make a read when a mutating verb follows anywhere
(`get_or_create_user` -> unknown). That is deliberately conservative: a noun spelled like a verb
(`get_message`, `get_charge`) also lands on unknown, which a one-line rule fixes.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any, Literal

EffectClass = Literal["read", "R", "C", "I", "unknown"]
EFFECT_CLASSES: tuple[EffectClass, ...] = ("read", "R", "C", "I", "unknown")
ClassSource = Literal["rule", "declared_compensation", "pack", "annotation", "heuristic", "default"]

# What a class means in a contract's terms (a proxied call's derived `kind: mcp` contract): C has no correction we
# could run, so like I it is irreversible there; an R is `reversible` only with its declared inverse (the caller
# says which), else `unknown`.
CLASS_REVERSIBILITY: dict[str, str] = {
    "read": "read_only",
    "R": "reversible",
    "C": "irreversible",
    "I": "irreversible",
    "unknown": "unknown",
}
CLASS_RISK: dict[str, str] = {"read": "low", "R": "low", "C": "medium", "I": "high", "unknown": "medium"}


@dataclass(frozen=True)
class ClassMeaning:
    """What a class means to the person who judges or undoes a call, in words: the one table every console surface
    (approval queue, decide page, saga detail) reads, so a C is never called irreversible on one and compensable on
    another. `{inverse}` is the declared inverse call, e.g. `delete_contact(id=${result.id})`."""

    # For display only: C reads "compensable" here although CLASS_REVERSIBILITY keeps it "irreversible", because
    # the derived contract's semantic.reversibility (policy matching, undo) must not promise a correction we hold.
    reversibility: str
    consequence: str
    undo: str


CLASS_MEANING: dict[str, ClassMeaning] = {
    "read": ClassMeaning("read_only", "read — changes nothing", "undo skips it: a read changes nothing"),
    "R": ClassMeaning("reversible", "reversible — undone by {tool}", "undo runs {inverse}"),
    "C": ClassMeaning(
        "compensable",
        "compensable — cannot be undone, only corrected afterwards (an undo lists it for an operator)",
        "undo lists it for a person to correct: C",
    ),
    "I": ClassMeaning("irreversible", "irreversible — no way back", "no way back: I"),
    "unknown": ClassMeaning(
        "unknown", "class unknown — nothing says what it changes: treat it as irreversible", "no way back: unknown"
    ),
}
# An R whose inverse is not declared (an R by its name only, such as create_*) has nothing an undo could run.
R_WITHOUT_INVERSE = ClassMeaning(
    "unknown",
    "R by its name only, no inverse declared — treat it as irreversible",
    "no way back: R without a declared inverse (a compensation pack entry would declare one)",
)


def class_meaning(effect_class: str, *, has_inverse: bool) -> ClassMeaning:
    """The meaning of `effect_class`; an unrecognised class reads as unknown (treated as irreversible)."""
    if effect_class == "R" and not has_inverse:
        return R_WITHOUT_INVERSE
    return CLASS_MEANING.get(effect_class, CLASS_MEANING["unknown"])


_READ_VERBS = ("list", "get", "read", "search", "find", "fetch", "query", "describe", "show", "count", "check", "view")
# First word -> class, with the why that goes into the reason. Read verbs are handled apart (see _by_name).
_VERB_TABLE: tuple[tuple[EffectClass, str, tuple[str, ...]], ...] = (
    (
        "unknown",
        "a create could be undone by deleting what its answer names, but no pack declares that inverse, and only a "
        "declared inverse makes a call R",
        ("create",),
    ),
    (
        "C",
        "it cannot be unsent, only corrected afterwards",
        ("send", "post", "publish", "notify", "message", "reply", "comment"),
    ),
    (
        "I",
        "nothing undoes it once it has happened",
        tuple(
            [
                "transfer",
                "pay",
                "charge",
                "execute",
                "drop",
                "wipe",
                "purge",
                "destroy",
                "cancel",
                "refund",
                "kill",
                "terminate",
                "erase",
                "truncate",
            ]
        ),
    ),
    (
        "unknown",
        "its inverse needs the previous state, which a name does not give",
        tuple(
            [
                "update",
                "delete",
                "remove",
                "set",
                "patch",
                "put",
                "run",
                "add",
                "insert",
                "write",
                "reset",
                "revoke",
                "grant",
                "deploy",
                "restart",
                "submit",
                "approve",
                "reject",
                "archive",
                "move",
                "replace",
                "rename",
                "edit",
                "modify",
                "upsert",
                "merge",
                "assign",
                "upload",
                "import",
                "save",
                "apply",
                "push",
                "restore",
                "clear",
                "enable",
                "disable",
                "invite",
                "schedule",
                "trigger",
            ]
        ),
    ),
)
_VERB_CLASSES: dict[str, tuple[EffectClass, str]] = {
    verb: (effect_class, why) for effect_class, why, verbs in _VERB_TABLE for verb in verbs
}
_MUTATING_VERBS = frozenset(_VERB_CLASSES)
_NAMESPACE_SEPARATORS = re.compile(r"__|[./:]")
_CAMEL_BOUNDARY = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
_WORD_SEPARATORS = re.compile(r"[_\-\s]+")


@dataclass(frozen=True)
class ClassRule:
    """An operator's classification of a tool: `tool` is a name or a glob (`*` any run, `?` one character), as
    the downstream server names it (before any proxy prefix); `server` limits it to one downstream."""

    tool: str
    effect_class: EffectClass
    server: str = ""
    reason: str = ""

    def matches(self, tool: str, server: str) -> bool:
        return (not self.server or self.server == server) and fnmatchcase(tool, self.tool)


@dataclass(frozen=True)
class Classification:
    effect_class: EffectClass
    source: ClassSource
    reason: str


def classify(
    tool_name: str,
    server: str,
    annotations: Mapping[str, Any] | None,
    rules: Sequence[ClassRule],
    declared_inverse: bool,
    *,
    inverse_source: str = "",
    declared_class: tuple[EffectClass, str] | None = None,
) -> Classification:
    """The class of `tool_name` on `server` by the cascade above.

    `annotations` are the tool's MCP annotations in wire form (`{"readOnlyHint": true, ...}`); `declared_inverse`
    says whether a compensation pack entry or a `kind: mcp` contract declares this tool's inverse (the caller looks
    both up; `inverse_source`, e.g. 'pack "demo-crm"', only goes into the reason). `declared_class`: a compensation
    pack says the tool has no inverse (class C or I, and why): below explicit rules, above the guesses.
    """
    for index, rule in enumerate(rules):
        if rule.matches(tool_name, server):
            scope = f"{rule.server}/{rule.tool}" if rule.server else rule.tool
            return Classification(
                rule.effect_class, "rule", rule.reason or f"rules[{index}] {scope} -> {rule.effect_class}"
            )
    if declared_class is not None:
        effect_class, why = declared_class
        return Classification(effect_class, "pack", why)
    if declared_inverse:
        where = inverse_source or "a compensation pack or kind: mcp contract"
        return Classification("R", "declared_compensation", f"{where} declares the inverse of {tool_name}")
    by_name = _by_name(tool_name)
    if not _hint(annotations, "readOnlyHint", "read_only_hint"):
        return by_name
    mutating = next((word for word in name_words(tool_name, every_segment=True) if word in _MUTATING_VERBS), None)
    if mutating is None:
        return Classification("read", "annotation", "the server declares readOnlyHint: true")
    why = (
        f"the server declares readOnlyHint: true, but the name holds {mutating!r}, a mutating verb, and an "
        "annotation never makes a call less guarded than its name"
    )
    if by_name.effect_class in ("read", "R"):
        return Classification("unknown", "heuristic", why)
    return Classification(by_name.effect_class, by_name.source, f"{by_name.reason}; {why}")


def name_words(tool_name: str, *, every_segment: bool = False) -> list[str]:
    """The lowercase words of a tool name's last segment: `gmail.sendEmail` -> ["send", "email"],
    `crm__list_contacts` -> ["list", "contacts"], `DropTable` -> ["drop", "table"]; with `every_segment`, of all
    its segments (`purge.cache` -> ["purge", "cache"]), for the checks a verb anywhere must not escape."""
    segments = _NAMESPACE_SEPARATORS.split(tool_name)
    spaced = " ".join(_CAMEL_BOUNDARY.sub("_", segment) for segment in (segments if every_segment else segments[-1:]))
    return [word.lower() for word in _WORD_SEPARATORS.split(spaced) if word]


def _by_name(tool_name: str) -> Classification:
    words = name_words(tool_name)
    verb = words[0] if words else ""
    if verb in _READ_VERBS:
        mutating = next((word for word in words[1:] if word in _MUTATING_VERBS), None)
        if mutating is None:
            return Classification("read", "heuristic", f"the name starts with {verb!r}, a read verb")
        return Classification(
            "unknown",
            "heuristic",
            f"the name starts with the read verb {verb!r} but also contains {mutating!r}, a mutating verb; "
            "a name alone never proves what a call does",
        )
    if verb in _VERB_CLASSES:
        effect_class, why = _VERB_CLASSES[verb]
        return Classification(effect_class, "heuristic", f"the name starts with {verb!r}: {why}")
    return Classification(
        "unknown", "default", f"no rule, declared compensation, annotation or name heuristic decides {tool_name!r}"
    )


def _hint(annotations: Mapping[str, Any] | None, wire_name: str, python_name: str) -> bool:
    # Only a literal true counts: a server sending "yes" or 1 has not declared anything we can rely on.
    if not annotations:
        return False
    return annotations.get(wire_name, annotations.get(python_name)) is True
