"""Validating a compensation pack document (registry.packs): every finding at once, each naming its JSON path, so an
operator fixes a pack in one pass. Strict: an unknown key is a typo, not an extension."""

from __future__ import annotations

import re
from typing import Any

from registry import jmespath_values
from registry.capture_outcomes import pattern_problems
from registry.templating import TEMPLATE_MARKER, iter_strings

IDENT = re.compile(r"[A-Za-z0-9_-]+")
REFERENCE = re.compile(r"\$\.(?P<root>args|result|pre_state)(?P<path>(?:\.[A-Za-z0-9_-]+(?:\[\*\])?)*)")
CONST = "const"
# {"jmespath": "<expression>"} over the pack's roots (args, result, pre_state): registry.jmespath_values.
JMESPATH = "jmespath"
_CAPTURE_ROOTS = ("args",)
_INVERSE_ROOTS = ("args", "result", "pre_state")
TEMPLATE_ROOTS = {"args": "input", "result": "result", "pre_state": "pre_state"}
_PACK_KEYS = {"name", "description", "entries"}
_ENTRY_KEYS = {
    "tool",
    "server",
    "capture",
    "inverse",
    "note",
    "ifNotFound",
    "ifNoMatch",
    "ifCaptureFailed",
    "readAfter",
}
# An entry without a capture (a create) reads what it made right after the call: $.args and $.result.
_MADE_ROOTS = ("args", "result")
# The branch keys of an entry, by the capture outcome they answer (registry.capture_outcomes).
BRANCHES = {"ifNotFound": "when_absent", "ifNoMatch": "when_unmatched", "ifCaptureFailed": "when_failed"}
_BRANCH_ROOTS = ("args", "result")
_DECLARATION_KEYS = {"tool", "server", "class", "reason", "note"}
_DECLARED_CLASSES = ("C", "I")
_CALL_KEYS = {"tool", "args"}
_CAPTURE_KEYS = {"tool", "args", "notFound", "textPattern", "readAfter"}
_READ_AFTER_KEYS = {"tool", "args", "textPattern"}


def pack_problems(document: Any, source: str) -> list[str]:
    """Every validation finding of one pack document, each prefixed with `source` and the JSON path."""
    if not isinstance(document, dict):
        return [f"{source}: a compensation pack is a JSON object with name, description and entries"]
    problems = _key_problems(document, _PACK_KEYS, {"name", "description", "entries"}, source)
    name = document.get("name")
    if "name" in document and not (isinstance(name, str) and IDENT.fullmatch(name)):
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
    if "class" in entry or "reason" in entry:
        return _declaration_problems(entry, where)
    problems = _key_problems(entry, _ENTRY_KEYS, {"tool", "inverse"}, where)
    if "tool" in entry and not is_tool_name(entry["tool"]):
        problems.append(f"{where}.tool: the tool to match: a non-empty name or glob (* any run of characters)")
    if "server" in entry and not (isinstance(entry["server"], str) and IDENT.fullmatch(entry["server"])):
        problems.append(f"{where}.server: {entry['server']!r} is not a server name of the proxy configuration")
    if "note" in entry and not (isinstance(entry["note"], str) and entry["note"].strip()):
        problems.append(f"{where}.note: when present, a non-empty note")
    if "capture" in entry:
        problems += _capture_problems(entry["capture"], f"{where}.capture")
    if "readAfter" in entry:
        problems += _made_read_problems(entry, f"{where}.readAfter")
    for key in BRANCHES:
        if key in entry:
            problems += _branch_problems(entry, key, f"{where}.{key}")
    if "inverse" in entry:
        problems += _call_problems(entry["inverse"], f"{where}.inverse", _INVERSE_ROOTS)
        problems += _pre_state_problems(entry, where)
    return problems


def _declaration_problems(entry: dict[str, Any], where: str) -> list[str]:
    """An entry saying the tool has no inverse: tool, class C or I, reason (server and note optional)."""
    both = {"inverse", "capture"} & entry.keys()  # said once below, not as unknown keys
    problems = _key_problems(
        {k: v for k, v in entry.items() if k not in both}, _DECLARATION_KEYS, {"tool", "class", "reason"}, where
    )
    if both:
        problems.append(
            f"{where}: an entry either declares an inverse or says there is none (class and reason), not both"
        )
    if "tool" in entry and not is_tool_name(entry["tool"]):
        problems.append(f"{where}.tool: the tool to match: a non-empty name or glob (* any run of characters)")
    if "server" in entry and not (isinstance(entry["server"], str) and IDENT.fullmatch(entry["server"])):
        problems.append(f"{where}.server: {entry['server']!r} is not a server name of the proxy configuration")
    if "class" in entry and entry["class"] not in _DECLARED_CLASSES:
        problems.append(
            f"{where}.class: {entry['class']!r}: a tool without an inverse is C (corrected afterwards) or I (no way "
            "back); a tool with one is R through its inverse"
        )
    if "reason" in entry and not (isinstance(entry["reason"], str) and entry["reason"].strip()):
        problems.append(f"{where}.reason: say why there is no inverse (an operator reads it)")
    if "note" in entry and not (isinstance(entry["note"], str) and entry["note"].strip()):
        problems.append(f"{where}.note: when present, a non-empty note")
    return problems


def _capture_problems(capture: Any, where: str) -> list[str]:
    """The capture read: a call reading $.args, plus how to read its outcome (registry.capture_outcomes)."""
    if not isinstance(capture, dict):
        return [f"{where}: an object with tool and args (notFound, textPattern and readAfter optional)"]
    problems = _call_problems(capture, where, _CAPTURE_ROOTS, _CAPTURE_KEYS)
    for key in ("notFound", "textPattern"):
        if key in capture:
            problems += pattern_problems(capture[key], f"{where}.{key}")
    after = capture.get("readAfter")
    if isinstance(after, dict):
        problems += _call_problems(after, f"{where}.readAfter", _CAPTURE_ROOTS, _READ_AFTER_KEYS)
        if "textPattern" in after:
            problems += pattern_problems(after["textPattern"], f"{where}.readAfter.textPattern")
    elif "readAfter" in capture and not isinstance(after, bool):
        problems.append(
            f"{where}.readAfter: true (read the capture again after the call, for the undo) or a read of its own "
            '{"tool", "args", "textPattern"}'
        )
    return problems


def _made_read_problems(entry: dict[str, Any], where: str) -> list[str]:
    """An entry's own readAfter: for a call with no capture (a create), a read of what it made, right after it."""
    after = entry["readAfter"]
    if "capture" in entry:
        return [f"{where}: an entry with a capture reads after the call with capture.readAfter; move it there"]
    if not isinstance(after, dict):
        return [f'{where}: a read of what the call made: {{"tool", "args", "textPattern"}} ($.args and $.result)']
    problems = _call_problems(after, where, _MADE_ROOTS, _READ_AFTER_KEYS)
    if "textPattern" in after:
        problems += pattern_problems(after["textPattern"], f"{where}.textPattern")
    return problems


def _branch_problems(entry: dict[str, Any], key: str, where: str) -> list[str]:
    """ifNotFound / ifNoMatch / ifCaptureFailed: another inverse (reading $.args and $.result) or none (class and
    reason). ifNotFound also answers a textPattern that does not match when there is no ifNoMatch (as it did before
    ifNoMatch existed), so a textPattern alone lets it be reached."""
    branch = entry[key]
    if "capture" not in entry:
        return [f"{where}: the branch answers a capture's outcome, but the entry declares no capture; add one"]
    capture = entry["capture"] if isinstance(entry["capture"], dict) else {}
    if key == "ifNotFound" and not {"notFound", "textPattern"} & capture.keys():
        return [
            f"{where}: nothing can make the capture find nothing; add capture.notFound (a pattern over its error's "
            "text) or capture.textPattern"
        ]
    if key == "ifNoMatch" and "textPattern" not in capture:
        return [f"{where}: nothing can leave the capture unmatched; add capture.textPattern (or drop the branch)"]
    if isinstance(branch, dict) and ("class" in branch or "reason" in branch) and "tool" not in branch:
        problems = _key_problems(branch, {"class", "reason"}, {"class", "reason"}, where)
        if "class" in branch and branch["class"] not in _DECLARED_CLASSES:
            problems.append(f"{where}.class: {branch['class']!r}: C (corrected afterwards) or I (no way back)")
        if "reason" in branch and not (isinstance(branch["reason"], str) and branch["reason"].strip()):
            problems.append(f"{where}.reason: say why there is no inverse then (an operator reads it)")
        return problems
    if not isinstance(branch, dict):
        return [f'{where}: a call {{"tool", "args"}} or no inverse {{"class": "C" or "I", "reason"}}']
    return _call_problems(branch, where, _BRANCH_ROOTS)


def _call_problems(
    call: Any, where: str, roots: tuple[str, ...], keys: set[str] | frozenset[str] = frozenset(_CALL_KEYS)
) -> list[str]:
    if not isinstance(call, dict):
        return [f"{where}: an object with tool and args"]
    problems = _key_problems(call, set(keys), _CALL_KEYS, where)
    if "tool" in call and not is_tool_name(call["tool"]):
        problems.append(f"{where}.tool: a non-empty tool name of the same server")
    args = call.get("args")
    if "args" in call and not isinstance(args, dict):
        problems.append(
            f"{where}.args: an object mapping each argument name to a $. reference, a "
            '{"const": value} or a {"jmespath": "<expression>"}'
        )
    elif isinstance(args, dict):
        problems += [
            f"{where}.args.{key}: {problem}" for key, ref in args.items() if (problem := _reference_problem(ref, roots))
        ]
    return problems


def _reference_problem(ref: Any, roots: tuple[str, ...]) -> str | None:
    allowed = " or ".join(f"$.{root}.x" for root in roots)
    if isinstance(ref, dict) and JMESPATH in ref:
        return _jmespath_problem(ref, roots)
    if isinstance(ref, dict):
        return _const_problem(ref)
    match = REFERENCE.fullmatch(ref) if isinstance(ref, str) else None
    if match is None:
        return (
            f"{ref!r} is not a reference; expected {allowed} (segments of letters, digits, '_' or '-'; one may end in "
            '[*] to read every item of a list), {"const": value} or {"jmespath": "<expression>"}'
        )
    return _root_problem(ref, match["root"], roots)


def _root_problem(ref: Any, root: str, roots: tuple[str, ...], form: str = "$.{}") -> str | None:
    """Why `ref` may not read `root` (written as `form` says: `$.result`, or `result` in an expression) where only
    `roots` exist, or None."""
    if root in roots:
        return None
    named, use = form.format(root), form + ".x"
    if roots == _BRANCH_ROOTS:
        return f"{ref!r} reads {named}, which this branch does not have (the capture found nothing)"
    if roots == _CAPTURE_ROOTS:
        return f"{ref!r} reads {named}, which does not exist before the call runs; use {use.format('args')}"
    return f"{ref!r} reads {named}, which does not exist here; use {' or '.join(map(use.format, roots))}"


def _jmespath_problem(value: dict[str, Any], roots: tuple[str, ...]) -> str | None:
    """{"jmespath": "<expression>"} over the pack's roots, of which only `roots` exist here."""
    if set(value) != {JMESPATH}:
        return f'{value!r}: an object argument with an expression is exactly {{"jmespath": "<expression>"}}'
    expression = value[JMESPATH]
    problem = jmespath_values.expression_problem(expression, _INVERSE_ROOTS)
    if problem is not None:
        return problem
    for root in sorted(jmespath_values.roots_read(expression)):
        if problem := _root_problem(expression, root, roots, form="{}"):
            return problem
    return None


def _const_problem(value: dict[str, Any]) -> str | None:
    if set(value) != {CONST}:
        return f'{value!r}: an object argument is a constant, exactly {{"const": <any JSON value>}}'
    if any(TEMPLATE_MARKER in text for _, text in iter_strings(value[CONST], "const")):
        return f"{value!r}: a constant holds no template ($" + "{...}); use a $. reference to read a value"
    if any(True for _ in jmespath_values.iter_expressions(value[CONST], "const")):
        return (
            f"{value!r}: a constant holds no {jmespath_values.KEY!r} object (the contract would evaluate it); use "
            '{"jmespath": "<expression>"} to build a value'
        )
    return None


def _pre_state_problems(entry: dict[str, Any], where: str) -> list[str]:
    inverse = entry.get("inverse")
    args = inverse.get("args") if isinstance(inverse, dict) else None
    if not isinstance(args, dict):
        return []
    if "capture" in entry:
        return _group_problems(entry["capture"], args, where)
    return [
        f"{where}.inverse.args.{key}: reads $.pre_state but the entry declares no capture, so nothing would ever be "
        "captured; add a capture read, or map from $.args / $.result"
        for key, ref in args.items()
        if (isinstance(ref, str) and ref.startswith("$.pre_state"))
        or (isinstance(ref, dict) and "pre_state" in jmespath_values.roots_read(ref.get(JMESPATH)))
    ]


def _key_problems(value: dict[str, Any], known: set[str], required: set[str], where: str) -> list[str]:
    problems = [f"{where}: {key!r} is missing" for key in sorted(required - value.keys())]
    problems += [
        f"{where}: unknown key {key!r} (a typo? the keys are {', '.join(sorted(known))})"
        for key in sorted(value.keys() - known)
    ]
    return problems


def is_tool_name(value: Any) -> bool:
    return isinstance(value, str) and bool(value.strip()) and value == value.strip()


def _group_problems(capture: Any, args: dict[str, Any], where: str) -> list[str]:
    """A prose capture's state is its pattern's named groups: an inverse may read only those."""
    pattern = capture.get("textPattern") if isinstance(capture, dict) else None
    if not isinstance(pattern, str) or pattern_problems(pattern, ""):
        return []
    groups = set(re.compile(pattern).groupindex)
    problems = []
    for key, ref in args.items():
        match = REFERENCE.fullmatch(ref) if isinstance(ref, str) else None
        if match is None or match["root"] != "pre_state" or not match["path"]:
            continue  # not a field of the captured state
        segments = match["path"].split(".")[1:]
        name = segments[0].removesuffix("[*]")
        if name in groups and (len(segments) > 1 or segments[0].endswith("[*]")):
            problems.append(
                f"{where}.inverse.args.{key}: {ref!r} reads inside the group {name!r}, which is text; read it whole "
                f"as $.pre_state.{name}"
            )
        elif name not in groups:
            named = ", ".join(sorted(groups)) or "none"
            problems.append(
                f"{where}.inverse.args.{key}: {ref!r} reads a group capture.textPattern does not name (its named "
                f"groups: {named}); name it in the pattern, e.g. (?P<{name or 'value'}>...)"
            )
    return problems
