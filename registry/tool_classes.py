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
    heuristic               the tool name's verbs (registry.tool_lexicon, below)
    default                 nothing matched -> unknown

The governing rule: R means "we know how to run the inverse". Only a declared inverse (or the operator) says so; a
name or an annotation never proves reversibility, so no name heuristic answers R: a `create_*` without a pack entry
is `unknown` (its inverse would be deleting what the answer names, but nothing declares it), and the ledger, the
preview report, the gate and the undo plan all read that one class.

Annotations are the server's own claims, and a server is not trusted to lower its own guard: an annotation never
makes a call less guarded than its name. `readOnlyHint: true` on a tool whose name holds a mutating verb, in any
segment (`delete_all_users`, `purge_cache`, `users_delete`, `purge.cache`, `exec`, `dropdb`, `find_and_nuke`) does
not make it a read: the name decides, and a name-based read becomes unknown (`purge_cache` stays I, `send_report`
C, `exec` I). `destructiveHint: false` lowers nothing. Only an operator rule says otherwise. (Sagaz lets
`readOnlyHint` win over the name.)

Name heuristics look at the last segment of the name (after `.`, `/`, `:` or `__`), split into words at
camelCase, `_` and `-`, and read its verbs by the lexicon (registry.tool_lexicon: short and glued forms such as
`rm`, `exec`, `dropdb`, `deleteall`, `deletecontacts`, `sqlexec`, inflections such as `deleting`, `deleted`,
`transfers`, trailing digits as in `delete2`, phrases such as `get_rid_of`, `check_out`):

    the name starts with a mutating verb      its class (`wire_money` I, `rm` unknown, `send_report` C)
    it starts with a read verb                read, unless a mutating verb follows where it can be a verb
                                              (`get_or_create_user`, `find_and_nuke` -> unknown)
    anything else                             unknown (default)

A verb that is as often a noun (`format`, `shell`, `exec`, `wire`, `checkout`, a glued word) is a read verb's
object (`get_format`, `read_shell_history` stay reads) unless a conjunction makes it a verb again
(`find_and_exec`); every other verb counts anywhere, and a plural after a read verb is a noun (`list_transfers` is
a read). That is
deliberately conservative: a noun spelled like a verb (`get_message`, `get_charge`) lands on unknown, which a
one-line rule fixes.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any, Literal

from registry.tool_lexicon import READ_VERBS, VERB_CLASSES, Verb, segment_verbs
from registry.tool_lexicon import EffectClass as EffectClass  # named here too: the classes' own module

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
    mutating = mutating_verb(tool_name)
    if mutating is None:
        return Classification("read", "annotation", "the server declares readOnlyHint: true")
    why = (
        f"the server declares readOnlyHint: true, but the name holds {mutating.spelled}, a mutating verb, and an "
        "annotation never makes a call less guarded than its name"
    )
    if by_name.effect_class in ("read", "R"):
        return Classification("unknown", "heuristic", why)
    return Classification(by_name.effect_class, by_name.source, f"{by_name.reason}; {why}")


def name_words(tool_name: str) -> list[str]:
    """The lowercase words of a tool name's last segment: `gmail.sendEmail` -> ["send", "email"],
    `crm__list_contacts` -> ["list", "contacts"], `DropTable` -> ["drop", "table"]."""
    segment = _NAMESPACE_SEPARATORS.split(tool_name)[-1]
    return [word.lower() for word in _WORD_SEPARATORS.split(_CAMEL_BOUNDARY.sub("_", segment)) if word]


def mutating_verb(tool_name: str) -> Verb | None:
    """The first mutating verb of the name, in any segment (`purge.cache`, `crm__wipe/records`), where it can be a
    verb (registry.tool_lexicon): None when the name holds none."""
    for segment in _NAMESPACE_SEPARATORS.split(tool_name):
        verbs = segment_verbs(name_words(segment))
        if verbs:
            return verbs[0]
    return None


def _by_name(tool_name: str) -> Classification:
    words = name_words(tool_name)
    verbs = segment_verbs(words)
    if verbs and verbs[0].at == 0:
        effect_class, why = VERB_CLASSES[verbs[0].verb]
        return Classification(effect_class, "heuristic", f"the name starts with {verbs[0].spelled}: {why}")
    if words and words[0] in READ_VERBS:
        if not verbs:
            return Classification("read", "heuristic", f"the name starts with {words[0]!r}, a read verb")
        return Classification(
            "unknown",
            "heuristic",
            f"the name starts with the read verb {words[0]!r} but also contains {verbs[0].spelled}, a mutating "
            "verb; a name alone never proves what a call does",
        )
    return Classification(
        "unknown", "default", f"no rule, declared compensation, annotation or name heuristic decides {tool_name!r}"
    )


def _hint(annotations: Mapping[str, Any] | None, wire_name: str, python_name: str) -> bool:
    # Only a literal true counts: a server sending "yes" or 1 has not declared anything we can rely on.
    if not annotations:
        return False
    return annotations.get(wire_name, annotations.get(python_name)) is True
