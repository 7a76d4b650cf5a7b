"""Whole-value templates in HTTP request bodies and MCP tool arguments, and the template grammar URLs share.

A JSON string that is exactly `${input.a.b}`, `${result.x}`, `${pre_state.x}`, `${saga.id}` or `${step.id}` is
replaced by the referenced value with its JSON type kept (an integer stays an integer). `${result...}` exists only
for compensation (the forward result); `${pre_state...}` only for the compensation of an MCP action that declares
a `capture` (the state read just before the forward call, persisted with the forward result).

A path segment may end in `[*]` (`${result.entities[*].name}`): the value there must be a list, and the rest of
the path is read from each item, giving a list (an inverse that takes every name a call created). Projections are
for whole values only, never inside a URL.

A value may instead be built by a JMESPath expression, `{"$jmespath": "result.items[*].{id: id}"}`, over the same
roots `input`, `result` and `pre_state` with the same rules (registry.jmespath_values): an inverse that renames the
fields of every item an answer lists. Validation and the readers below (which roots a request reads) see both forms.

There is no interpolation inside longer strings: a value like "order ${input.id}" is refused at validation,
because sending it literally would almost certainly be a mistake and partial interpolation would silently
stringify numbers. URLs are the exception (a URL is text, so an integer id becoming a path segment is expected):
registry.url_templates renders templates inside HTTP action URLs with the same roots and rules, one
percent-encoded path segment or query value per template.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

from registry import jmespath_values
from registry.errors import ActionFailure

TEMPLATE_MARKER = "${"
# One template, `${expr}`; `expr` is checked by expression_problem.
TEMPLATE = re.compile(r"\$\{(?P<expr>[^{}]*)\}")
_SEGMENT = re.compile(r"[A-Za-z0-9_-]+")
_PROJECTED_SEGMENT = re.compile(r"[A-Za-z0-9_-]+(\[\*\])?")
PROJECTION = "[*]"
# `saga` and `step` expose only their id: the template surface stays small and every rendered value is one the
# coordinator already journals.
_ROOTS_WITH_PATHS = ("input", "result", "pre_state")
_ID_ONLY_ROOTS = ("saga", "step")


def iter_strings(value: Any, path: str) -> Iterator[tuple[str, str]]:
    """Every string inside a JSON value, with its path (`body.items[0].name`)."""
    if isinstance(value, str):
        yield path, value
    elif isinstance(value, Mapping):
        for key, item in value.items():
            yield from iter_strings(item, f"{path}.{key}")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from iter_strings(item, f"{path}[{index}]")


def template_problems(value: Any, path: str, *, allow_result: bool, allow_pre_state: bool = False) -> list[str]:
    """Validation findings for every template-looking string and every `{"$jmespath": ...}` inside `value`."""
    problems = jmespath_values.value_problems(value, path, allow_result=allow_result, allow_pre_state=allow_pre_state)
    for where, text in iter_strings(value, path):
        if TEMPLATE_MARKER in text:
            problem = expression_problem(
                text, allow_result=allow_result, allow_pre_state=allow_pre_state, allow_projection=True
            )
            if problem:
                problems.append(f"{where}: {problem}")
    return problems


def expression_problem(
    text: str, *, allow_result: bool, allow_pre_state: bool, allow_projection: bool = False
) -> str | None:
    """Why `text` is not one usable template (`${input.a}`, ...), or None when it is."""
    match = TEMPLATE.fullmatch(text)
    if match is None:
        return (
            f"{text!r} mixes a template with other text; a template must be the whole string value, "
            'e.g. "${input.amount}" (interpolation inside longer strings is not supported)'
        )
    parts = match["expr"].split(".")
    root, rest = parts[0], parts[1:]
    if root in _ID_ONLY_ROOTS:
        return None if rest == ["id"] else f"{text!r}: only ${{{root}.id}} is available from {root}"
    if root not in _ROOTS_WITH_PATHS:
        return (
            f"{text!r} uses the unknown root {root!r}; use input, result (compensation only), pre_state "
            "(compensation of an mcp action with capture), saga.id or step.id"
        )
    if root == "result" and not allow_result:
        return (
            f"{text!r} refers to the forward result, which does not exist yet when the forward call is made; "
            "${result...} is only allowed in compensation"
        )
    if root == "pre_state" and not allow_pre_state:
        return (
            f"{text!r} refers to the captured pre-state, which only exists for the compensation of an mcp action "
            "that declares a 'capture' tool call; add a capture, or use input/result instead"
        )
    segment = _PROJECTED_SEGMENT if allow_projection else _SEGMENT
    if not all(segment.fullmatch(part) for part in rest):
        projected = ", a segment may end in [*] to read every item of a list" if allow_projection else ""
        return f"{text!r}: path segments must be letters, digits, '_' or '-' separated by '.'{projected}"
    return None


def render(value: Any, scope: Mapping[str, Any], path: str = "body") -> Any:
    """Replace whole-value templates and `{"$jmespath": ...}` in `value` using `scope` (keys input, result, saga,
    step).

    A referenced path that is missing (an expression yielding null) is a permanent failure: retrying the same input
    cannot make it appear.
    """
    if isinstance(value, str):
        match = TEMPLATE.fullmatch(value)
        return lookup(match["expr"], scope, value, path) if match else value
    if jmespath_values.is_expression(value):
        return jmespath_values.evaluate(value[jmespath_values.KEY], scope, path)
    if isinstance(value, Mapping):
        return {key: render(item, scope, f"{path}.{key}") for key, item in value.items()}
    if isinstance(value, list):
        return [render(item, scope, f"{path}[{index}]") for index, item in enumerate(value)]
    return value


def lookup(expr: str, scope: Mapping[str, Any], template: str, path: str) -> Any:
    """The value `expr` (`input.a.b`, `result.items[*].id`) names in `scope`; raises
    ActionFailure(TEMPLATE_PATH_MISSING) naming `path`."""
    return _walk(scope, expr.split("."), [], template, path)


def _walk(current: Any, parts: list[str], walked: list[str], template: str, path: str) -> Any:
    for index, part in enumerate(parts):
        name = part.removesuffix(PROJECTION)
        found, current = _child(current, name)
        if not found or (part.endswith(PROJECTION) and not isinstance(current, list)):
            raise _missing(template, path, walked, name if not found else part, current)
        walked = [*walked, part]
        if part.endswith(PROJECTION):
            rest = parts[index + 1 :]
            return [_walk(item, rest, [*walked[:-1], f"{name}[{n}]"], template, path) for n, item in enumerate(current)]
    return current


def _missing(template: str, path: str, walked: list[str], part: str, current: Any) -> ActionFailure:
    where = ".".join(walked) or "the template scope"
    if part.endswith(PROJECTION) and current is not None:
        what = f"{where}.{part.removesuffix(PROJECTION)} is a {type(current).__name__}, not a list"
    else:
        what = f"{where} has no {part!r} ({'it is null' if current is None else 'it is a ' + type(current).__name__})"
    return ActionFailure(
        "TEMPLATE_PATH_MISSING",
        f"{path}: template {template} cannot be rendered: {what}. "
        "The request was not sent. The step's input (or the forward result, for compensation) lacks a "
        "field this contract needs; retrying will not help. Fix the input, or publish a corrected "
        "contract version.",
        retryable=False,
    )


def _child(container: Any, key: str) -> tuple[bool, Any]:
    """(found, value); on a miss the container itself is returned so the message can describe it."""
    if isinstance(container, Mapping) and key in container:
        return True, container[key]
    if isinstance(container, list) and key.isdigit() and int(key) < len(container):
        return True, container[int(key)]
    return False, container


def references_result_fields(value: Any) -> bool:
    """Whether a request reads fields of the forward result (`${result.x}`, or a `$jmespath` expression reading
    `result`), which only exist once the forward call answered. The pre-state counts too: the captured pre-state is
    persisted inside the forward result of an MCP step, so without a result there is no pre-state either."""
    return any(expr.startswith(("result.", "pre_state.")) for expr in _expressions(value)) or bool(
        {"result", "pre_state"} & jmespath_values.roots_in(value)
    )


def references_forward_answer(value: Any) -> bool:
    """Whether a request reads the forward call's own answer (`${result...}`, or `result` in a `$jmespath`
    expression), as opposed to only the pre-state captured before it, which an attempt keeps even when its answer
    was lost."""
    return any(expr == "result" or expr.startswith("result.") for expr in _expressions(value)) or (
        "result" in jmespath_values.roots_in(value)
    )


def roots_read(value: Any) -> set[str]:
    """The scope roots (`input`, `result`, `pre_state`, ...) the templates and `$jmespath` expressions inside `value`
    read."""
    return {expr.split(".")[0] for expr in _expressions(value)} | jmespath_values.roots_in(value)


def _expressions(value: Any) -> Iterator[str]:
    """Every template expression inside a request, whole-value or inside a URL (`.../services/${result.id}`)."""
    for _, text in iter_strings(value, "request"):
        for match in TEMPLATE.finditer(text):
            yield match["expr"]
