"""Templates inside HTTP action URLs: `https://api.example.com/services/${result.id}`, `.../items?sku=${input.sku}`.

The roots and path rules are those of bodies (registry.templating): `${input.a}`, `${result.x}` (compensation
only), `${saga.id}`, `${step.id}`. What differs is where a template may stand and what its value becomes:

- A template may stand in a path segment or a query value, alone or with literal text around it
  (`/v1/item-${input.id}`, `?q=sku:${input.sku}`). Its value is percent-encoded as a whole (RFC 3986: every byte
  but the unreserved `A-Z a-z 0-9 - . _ ~`), so it stays inside its segment or value: `a/b` is sent as `a%2Fb`,
  `?x=1` as `%3Fx%3D1`, `%2e` as `%252e`. A value can never add a segment, a query or a fragment.
- Scheme, user info, host and port are never templated (a value must never decide where a request goes), nor
  is the fragment (never sent) or a query parameter name. These are refused when the contract is validated.
- A value must be a non-empty string or an integer. Null, booleans, floats (`1.0` or `1e-05`?), objects and
  lists are refused: at validation when the contract's input or output schema says so, otherwise when rendering.
  The empty string is refused too (`DELETE /services/` would address the whole collection), and so is a segment
  that renders to `.` or `..`, because HTTP clients and servers resolve those to another resource.

A render-time refusal is a permanent ActionFailure raised before anything is sent.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from registry.errors import ActionFailure
from registry.templating import TEMPLATE, TEMPLATE_MARKER, expression_problem, lookup

# JSON Schema types whose values can render into a URL (a "number" may hold an integer, checked when rendering).
_RENDERABLE_TYPES = frozenset({"string", "integer", "number"})
# Path segments that clients and servers resolve (RFC 3986 section 5.2.4) instead of sending as names.
_DOT_SEGMENTS = frozenset({".", ".."})
_MASK = "\0"
_VALUE_RULE = (
    "a URL template value must be a non-empty string or an integer (it is sent as one percent-encoded path segment "
    "or query value)"
)


@dataclass(frozen=True)
class _Bounds:
    """Where the parts of a URL start, found on the URL with its templates masked out."""

    path: int  # first character after the authority
    query: int  # the '?' (or `fragment` when there is no query)
    fragment: int  # the '#' (or len(url) when there is no fragment)


def _masked(url: str) -> str:
    """The URL with each complete template blanked, so delimiters inside an (invalid) expression are not seen."""
    return TEMPLATE.sub(lambda match: _MASK * len(match[0]), url)


def _first(text: str, chars: str, start: int, end: int) -> int:
    found = [index for char in chars if (index := text.find(char, start, end)) != -1]
    return min(found, default=end)


def _bounds(masked: str) -> _Bounds:
    authority = masked.index("://") + 3
    path = _first(masked, "/?#", authority, len(masked))
    fragment = _first(masked, "#", path, len(masked))
    return _Bounds(path=path, query=_first(masked, "?", path, fragment), fragment=fragment)


# --- validation -------------------------------------------------------------------------------------------------


def url_template_problems(url: Any, where: str, *, allow_result: bool, schemas: Mapping[str, Any]) -> list[str]:
    """Validation findings for the templates in one HTTP request URL, each prefixed with `where`.

    `schemas` maps a root (`input`, `result`) to the contract's JSON Schema for it, so a template whose value
    can never be rendered (the schema says object, list, boolean or null) is refused before anything runs.
    """
    if not isinstance(url, str) or TEMPLATE_MARKER not in url:
        return []
    masked = _masked(url)
    if "://" not in masked:
        return []  # not an absolute URL: the JSON Schema pattern reports it
    problems = []
    if TEMPLATE_MARKER in masked:
        problems.append(
            f"{where}: {url!r} has a '${{' that does not open a complete template; write templates as "
            "${input.id}, and no '{' or '}' inside one"
        )
    bounds = _bounds(masked)
    for match in TEMPLATE.finditer(url):
        problem = (
            _placement_problem(masked, bounds, match)
            or expression_problem(match[0], allow_result=allow_result, allow_pre_state=False)
            or _declared_type_problem(match, schemas)
        )
        if problem:
            problems.append(f"{where}: {problem}")
    return problems


def _placement_problem(masked: str, bounds: _Bounds, match: re.Match[str]) -> str | None:
    template, start = match[0], match.start()
    if start < bounds.path:
        return (
            f"{template} is in the scheme, host or port; templates may only stand in the path or in a query value, "
            "because a rendered value must never choose where the request goes. Write the scheme, host and port "
            "literally (publish one contract version per host)"
        )
    if start > bounds.fragment:
        return f"{template} is in the fragment, which is never sent to the server; move it into the path or the query"
    if start > bounds.query:
        parameter_start = max(masked.rfind("&", bounds.query, start), bounds.query) + 1
        if "=" not in masked[parameter_start:start]:
            return (
                f"{template} is in a query parameter name; templates may only stand in query values, "
                "e.g. ?sku=${input.sku}"
            )
    return None


def _declared_type_problem(match: re.Match[str], schemas: Mapping[str, Any]) -> str | None:
    """A template whose schema rules out a string or an integer; None when the schema allows one or says nothing."""
    root, *fields = match["expr"].split(".")
    if root == "input" and not fields:
        return f"{match[0]} is the whole input, which is always an object; name one field, e.g. ${{input.id}}"
    declared = _declared_types(schemas.get(root), fields)
    if declared is None or declared & _RENDERABLE_TYPES:
        return None
    return (
        f"{match[0]} names a value that the contract's {'input' if root == 'input' else 'output'} schema declares "
        f"as {'/'.join(sorted(declared))}; a URL template value must be a non-empty string or an integer (it is "
        "sent as one path segment or query value). Reference a string or integer field instead"
    )


def _declared_types(schema: Any, fields: list[str]) -> set[str] | None:
    for field in fields:
        if not isinstance(schema, dict):
            return None
        properties = schema.get("properties")
        if isinstance(properties, dict) and field in properties:
            schema = properties[field]
        elif field.isdigit() and isinstance(schema.get("items"), dict):
            schema = schema["items"]
        else:
            return None
    declared = schema.get("type") if isinstance(schema, dict) else None
    if isinstance(declared, str):
        return {declared}
    if isinstance(declared, list) and all(isinstance(item, str) for item in declared):
        return set(declared)
    return None


# --- rendering --------------------------------------------------------------------------------------------------


def render_url(url: str, scope: Mapping[str, Any], where: str) -> str:
    """The URL with each template replaced by its percent-encoded value; raises ActionFailure before anything is
    sent when a value is missing or cannot be one path segment or query value.

    Precondition: `url` passed url_template_problems (contracts are validated when registered), so no template
    stands in the scheme, host, port, fragment or a query name, and no expression contains a delimiter.
    """
    if TEMPLATE_MARKER not in url:
        return url
    bounds = _bounds(_masked(url))
    path = "/".join(_render_segment(segment, scope, where) for segment in url[bounds.path : bounds.query].split("/"))
    rendered = url[: bounds.path] + path
    if bounds.query < bounds.fragment:
        parameters = url[bounds.query + 1 : bounds.fragment].split("&")
        rendered += "?" + "&".join(_render_parameter(parameter, scope, where) for parameter in parameters)
    return rendered + url[bounds.fragment :]


def _render_segment(segment: str, scope: Mapping[str, Any], where: str) -> str:
    rendered = _render_text(segment, scope, where)
    if rendered in _DOT_SEGMENTS and rendered != segment:
        raise _unusable(
            where,
            _templates_in(segment),
            f"renders the path segment {rendered!r}, which HTTP clients and servers resolve ('..' climbs one level) "
            "instead of sending it as a name",
        )
    return rendered


def _render_parameter(parameter: str, scope: Mapping[str, Any], where: str) -> str:
    name, equals, value = parameter.partition("=")
    return name + equals + _render_text(value, scope, where)


def _render_text(text: str, scope: Mapping[str, Any], where: str) -> str:
    return TEMPLATE.sub(lambda match: _encoded_value(match, scope, where), text)


def _encoded_value(match: re.Match[str], scope: Mapping[str, Any], where: str) -> str:
    value = lookup(match["expr"], scope, match[0], where)
    # bool is an int in Python; `True` would be sent as "True", which no API means.
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise _unusable(where, match[0], f"yields {_kind(value)}; {_VALUE_RULE}")
    if value == "":
        raise _unusable(
            where,
            match[0],
            "yields an empty string; a URL template value must not be empty, because an empty segment changes what "
            "the request addresses (DELETE /services/ names the whole collection)",
        )
    try:
        return quote(str(value), safe="")
    except UnicodeEncodeError:
        raise _unusable(where, match[0], "yields text with an unpaired surrogate (no UTF-8 form)") from None


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    names = {bool: "a boolean", float: "a float", dict: "an object", list: "a list"}
    return names.get(type(value), f"a {type(value).__name__}")


def _templates_in(text: str) -> str:
    return ", ".join(match[0] for match in TEMPLATE.finditer(text))


def _unusable(where: str, template: str, why: str) -> ActionFailure:
    return ActionFailure(
        "URL_TEMPLATE_VALUE_INVALID",
        f"{where}: template {template} {why}. The request was not sent and retrying will not help: "
        "fix the input (or, for ${result...}, check what the forward call returned), or publish a contract "
        "version that takes the value from another field.",
        retryable=False,
    )
