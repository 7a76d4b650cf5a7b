"""Whole values built by a JMESPath expression: `{"$jmespath": "<expression>"}` where a template may stand.

A `${...}` template (registry.templating) reads one path, with `[*]` for every item of a list. Some inverses need a
value built from the answer instead, such as a renaming per item: @modelcontextprotocol/server-memory's
add_observations answers `{"results": [{"entityName": "Ada", "addedObservations": ["math"]}]}` and its exact
inverse, delete_observations, takes `{"deletions": [{"entityName": "Ada", "observations": ["math"]}]}`. JMESPath
(jmespath.org) is a specified query language for JSON with a well-kept Python implementation, and its multi-select
hash says exactly that:

    "deletions": {"$jmespath": "result.results[*].{entityName: entityName, observations: addedObservations}"}

The expression is evaluated over `{"input": ..., "result": ..., "pre_state": ...}`, the scope a template reads
(`saga` and `step` are not offered), and starts from those roots by name: `@` or `*` at its top (the scope itself)
is refused, and the rules of `${...}` apply to the roots it reads: `result` only in compensation, `pre_state` only in
the compensation of an MCP action with a capture. Inside a projection, names are read from each item (JMESPath has
no way back to the top), so one expression cannot pair an item with a field of `input`.

JMESPath answers null for a field that is not there, so an expression that yields null fails the call before it is
sent, like a missing template path (TEMPLATE_PATH_MISSING, not retried): the input or the answer did not have what
the expression needs. An empty list is a value (an inverse with nothing to take back). A compensation pack writes
`{"jmespath": "..."}` over its own roots `args`, `result`, `pre_state` (registry.packs; over_roots gives it the
contract's). The object `{"$jmespath": ...}` is reserved: a constant cannot hold one.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Mapping
from typing import Any

import jmespath
from jmespath.exceptions import JMESPathError
from jmespath.functions import Functions

from registry.errors import ActionFailure

KEY = "$jmespath"
ROOTS = ("input", "result", "pre_state")
# How a failure names what a root holds.
_ROOT_WORDS = {"input": "the step's input", "result": "the forward call's answer", "pre_state": "the captured state"}
# What roots_read says for an expression that reads the scope itself (`@`, `*`, `[*]` at its top).
WHOLE = "@"
# Nodes whose first child reads what the node reads and whose other children read what the first yields (a pipe's
# right side, a projection's, the rest of a.b.c) or each item of it (a filter's condition).
_DERIVED_AFTER_FIRST = frozenset(
    {"subexpression", "index_expression", "projection", "value_projection", "filter_projection", "pipe"}
)
# The functions JMESPath offers: name -> (arity, variadic).
_FUNCTIONS = {
    name: (len(spec["signature"]), bool(spec["signature"] and spec["signature"][-1].get("variadic")))
    for name, spec in Functions.FUNCTION_TABLE.items()
}


def is_expression(value: Any) -> bool:
    return isinstance(value, Mapping) and set(value) == {KEY}


def iter_expressions(value: Any, path: str) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """Every object holding `$jmespath` inside a JSON value, with its path (`arguments.deletions`)."""
    if isinstance(value, Mapping):
        if KEY in value:
            yield path, value
            return
        for key, item in value.items():
            yield from iter_expressions(item, f"{path}.{key}")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from iter_expressions(item, f"{path}[{index}]")


def expression_problem(expression: Any, roots: Collection[str]) -> str | None:
    """Why `expression` is not a JMESPath expression over `roots` read by name, or None when it is."""
    if not isinstance(expression, str) or not expression.strip():
        return f"{expression!r}: a JMESPath expression (a non-empty string)"
    try:
        parsed = _parsed(expression)
    except JMESPathError as bad:
        return f"{expression!r} is not a JMESPath expression: {said(bad)}"
    for name, given in _calls(parsed):
        if name not in _FUNCTIONS:
            return f"{expression!r} calls {name}(), which is not a JMESPath function"
        arity, variadic = _FUNCTIONS[name]
        if given < arity or (given > arity and not variadic):
            return f"{expression!r} calls {name}() with {given} argument(s); it takes {arity}{' or more' * variadic}"
    named = ", ".join(roots)
    read = _reads(parsed, at_scope=True)
    if WHOLE in read:
        return f"{expression!r} reads the whole scope (@ or * at its top); start from a root by name: {named}"
    if unknown := sorted(read - set(roots)):
        return f"{expression!r} reads {unknown[0]!r}, which is not a root; start from one of {named}"
    return None


def roots_read(expression: Any) -> frozenset[str]:
    """The names an expression reads at its top (`input`, `result`, ...; WHOLE for the scope itself); none for one
    that does not compile."""
    try:
        return frozenset(_reads(_parsed(expression), at_scope=True)) if isinstance(expression, str) else frozenset()
    except JMESPathError:
        return frozenset()


def roots_in(value: Any) -> set[str]:
    """The roots every `$jmespath` expression inside `value` reads."""
    return set[str]().union(*(roots_read(found.get(KEY)) for _, found in iter_expressions(value, "")))


def value_problems(value: Any, path: str, *, allow_result: bool, allow_pre_state: bool) -> list[str]:
    """Validation findings for every `{"$jmespath": ...}` inside `value`, with the root rules of `${...}`."""
    problems = []
    for where, found in iter_expressions(value, path):
        if set(found) != {KEY}:
            problems.append(f'{where}: an object holding {KEY!r} is an expression, exactly {{"{KEY}": "..."}}')
            continue
        expression = found[KEY]
        problem = expression_problem(expression, ROOTS)
        read = roots_read(expression)
        if problem is None and "result" in read and not allow_result:
            problem = (
                f"{expression!r} reads the forward result, which does not exist yet when this call is made; result "
                "is only read in compensation"
            )
        if problem is None and "pre_state" in read and not allow_pre_state:
            problem = (
                f"{expression!r} reads the captured pre-state, which only exists for the compensation of an mcp "
                "action that declares a 'capture' tool call"
            )
        if problem:
            problems.append(f"{where}: {problem}")
    return problems


def evaluate(expression: str, scope: Mapping[str, Any], path: str) -> Any:
    """The value `expression` yields over `scope`'s roots; ActionFailure(TEMPLATE_PATH_MISSING) naming `path` when
    it yields null or cannot be evaluated."""
    data = {root: scope.get(root) for root in ROOTS}
    try:
        value = jmespath.compile(expression).search(data)
    except (JMESPathError, TypeError) as failed:  # TypeError: not a string (an unvalidated contract)
        raise _unrenderable(expression, path, f"JMESPath could not evaluate it ({said(failed)})") from None
    if value is None:
        raise _unrenderable(expression, path, "it yields null")
    return value


def over_roots(expression: str, names: Mapping[str, str]) -> str:
    """`expression`, written over roots of other names (`names`: its root -> ours, e.g. args -> input), as one over
    ours: a multi-select hash first gives it the names it reads, `{args: input} | (expression)`. One that reads only
    roots named alike is kept as it is."""
    read = sorted(roots_read(expression))
    if all(names.get(root, root) == root for root in read):
        return expression
    pairs = ", ".join(f"{root}: {names.get(root, root)}" for root in read)
    return f"{{{pairs}}} | ({expression})"


def said(error: Exception) -> str:
    """JMESPath's own message, on one line (without the expression it repeats and its caret)."""
    first = str(error).splitlines()[0] if str(error) else type(error).__name__
    return first.removesuffix(":").removesuffix(", for expression").strip()


def _parsed(expression: str) -> dict[str, Any]:
    tree: dict[str, Any] = jmespath.compile(expression).parsed  # jmespath caches what it compiled
    return tree


def _reads(node: Mapping[str, Any], *, at_scope: bool) -> set[str]:
    """The names `node` reads from the scope itself (at_scope: it is evaluated against the scope)."""
    kind = node.get("type")
    if kind == "field":
        return {str(node["value"])} if at_scope else set()
    if kind in ("current", "identity"):
        return {WHOLE} if at_scope else set()
    children = [child for child in node.get("children", []) if isinstance(child, Mapping)]  # a slice holds ints
    if kind == "expref":
        at_scope = False  # `&name`: applied to each item by the function it is given to (sort_by, map, ...)
    if kind in _DERIVED_AFTER_FIRST and children:
        first, rest = children[0], children[1:]
        return _reads(first, at_scope=at_scope).union(*(_reads(child, at_scope=False) for child in rest))
    return set[str]().union(*(_reads(child, at_scope=at_scope) for child in children))


def _calls(node: Mapping[str, Any]) -> Iterator[tuple[str, int]]:
    """Every function the expression calls, with how many arguments it gives."""
    children = [child for child in node.get("children", []) if isinstance(child, Mapping)]
    if node.get("type") == "function_expression":
        yield str(node["value"]), len(children)
    for child in children:
        yield from _calls(child)


def _unrenderable(expression: str, path: str, why: str) -> ActionFailure:
    read = roots_read(expression)
    what = " or ".join(name for root, name in _ROOT_WORDS.items() if root in read) or "the step's input"
    return ActionFailure(
        "TEMPLATE_PATH_MISSING",
        f"{path}: the JMESPath expression {expression!r} cannot be rendered: {why}, so {what} did not have what it "
        "needs. The request was not sent; retrying will not help. Fix the input, or publish a corrected contract "
        "version.",
        retryable=False,
    )
