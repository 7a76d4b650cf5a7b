"""What the proxy exposes: the union of every downstream's tools, prompts, resources and resource templates.

Names pass through unchanged. A server with a `prefix` exposes its tools and prompts as `prefix__name` and its
resource URIs and templates as `prefix+uri`; nothing is ever renamed without the operator asking for it. Two
servers exposing the same name is a `NameCollision` that says which `"prefix"` to add: the proxy refuses to start
with one, and a later rebuild that would create one keeps the previous catalog.

A tool whose exposed name breaks MCP's naming rule (1 to 128 of `A-Z a-z 0-9 _ - .`) is left out: a client could not
call it reliably, and a hostile name (spaces, newlines, 100,000 characters) must not reach agents or error texts.
The catalog keeps what it left out (`left_out`) so the proxy can warn once.

Every tool carries its downstream definition hash (sha256 of the canonical JSON of its definition: name, title,
description, schemas, annotations), which the proxy checks against the deployment's pin (registry.tool_pins).
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import mcp.types as types
from mcp.shared.exceptions import MCPError
from mcp.shared.tool_name_validation import validate_tool_name
from mcp.shared.uri_template import InvalidUriTemplate, UriTemplate
from mcp_types.jsonrpc import INVALID_PARAMS

from registry.tool_pins import definition_hash as pinned_hash
from registry.tool_pins import tool_definition
from sagas.protocols.proxy.specs import ServerSpec

# How much of a name an error text or a log line shows: enough to recognise it, never a flood.
NAME_SHOWN_CHARS = 64
# Items per tools/list (and prompts, resources) page sent to the client: large enough that most clients read the
# whole union in one round trip, small enough that one answer stays well under the transports' message limits.
PAGE_SIZE = 200

T = TypeVar("T")


def short_name(name: str) -> str:
    """`name` as an error text may show it: quoted, control characters escaped, at most NAME_SHOWN_CHARS of it."""
    if len(name) <= NAME_SHOWN_CHARS:
        return repr(name)
    return f"{name[:NAME_SHOWN_CHARS]!r}... ({len(name)} characters)"


@dataclass(frozen=True)
class LeftOut:
    """A downstream tool the catalog does not expose, and why."""

    server: str
    name: str  # short_name of the exposed name
    why: str

    def describe(self) -> str:
        return f'downstream "{self.server}" offers the tool {self.name}, left out of tools/list: {self.why}'


def definition_hash(tool: types.Tool) -> str:
    """sha256 of the canonical JSON of the tool's pinned definition (registry.tool_pins.tool_definition): name,
    title, description, input and output schemas and annotations. A description is part of it: it is what the
    agent reads, so a server rewording it can change what the agent does."""
    return pinned_hash(tool_definition(tool.model_dump(mode="json", by_alias=True, exclude_none=True)))


@dataclass(frozen=True)
class ExposedTool:
    name: str  # what the client sees and calls
    server: str
    tool: types.Tool  # the downstream definition, under its downstream name
    definition_hash: str

    def advertised(self) -> types.Tool:
        return self.tool.model_copy(update={"name": self.name})


@dataclass(frozen=True)
class ExposedPrompt:
    name: str
    server: str
    prompt: types.Prompt

    def advertised(self) -> types.Prompt:
        return self.prompt.model_copy(update={"name": self.name})


@dataclass(frozen=True)
class ExposedResource:
    uri: str
    server: str
    resource: types.Resource

    def advertised(self) -> types.Resource:
        return self.resource.model_copy(update={"uri": self.uri})


@dataclass(frozen=True)
class ExposedTemplate:
    uri_template: str
    server: str
    template: types.ResourceTemplate

    def advertised(self) -> types.ResourceTemplate:
        return self.template.model_copy(update={"uri_template": self.uri_template})


@dataclass(frozen=True)
class ServerListing:
    """What one connected downstream offers, as it listed it (every page)."""

    spec: ServerSpec
    tools: tuple[types.Tool, ...] = ()
    prompts: tuple[types.Prompt, ...] = ()
    resources: tuple[types.Resource, ...] = ()
    templates: tuple[types.ResourceTemplate, ...] = ()
    instructions: str | None = None
    offers_prompts: bool = False
    offers_resources: bool = False


@dataclass(frozen=True)
class Collision:
    kind: str  # "tool", "prompt", "resource", "resource template"
    name: str
    first: ServerSpec
    second: ServerSpec

    def describe(self) -> str:
        noun = {"tool": "tool names", "prompt": "prompt names"}.get(self.kind, "resource URIs")
        way = "prefix__name" if self.kind in ("tool", "prompt") else "prefix+uri"
        if self.second.prefix:
            hint = f'a "prefix" other than "{self.second.prefix}"'
        else:
            hint = f'"prefix": "{self.second.name}"'
        return (
            f'the servers "{self.first.name}" and "{self.second.name}" both expose the {self.kind} {self.name!r}. '
            f'The proxy never renames silently: add {hint} to the server "{self.second.name}" (or a prefix to '
            f'"{self.first.name}") in the config, and that server\'s {noun} are exposed as {way}.'
        )


class NameCollision(Exception):
    def __init__(self, collisions: Sequence[Collision]) -> None:
        self.collisions = tuple(collisions)
        lines = [collision.describe() for collision in collisions]
        super().__init__(
            "Name collision: " + lines[0] if len(lines) == 1 else "Name collisions:\n- " + "\n- ".join(lines)
        )


def exposed_uri(spec: ServerSpec, uri: str) -> str:
    return f"{spec.prefix}+{uri}" if spec.prefix else uri


@dataclass(frozen=True)
class Catalog:
    """An immutable snapshot; a rebuild makes a new one (the generation tells pagination cursors apart)."""

    tools: dict[str, ExposedTool] = field(default_factory=dict)
    prompts: dict[str, ExposedPrompt] = field(default_factory=dict)
    resources: dict[str, ExposedResource] = field(default_factory=dict)
    templates: dict[str, ExposedTemplate] = field(default_factory=dict)
    listings: tuple[ServerListing, ...] = ()
    generation: int = 0
    left_out: tuple[LeftOut, ...] = ()  # tools whose exposed name breaks MCP's naming rule

    @classmethod
    def build(cls, listings: Iterable[ServerListing], *, generation: int = 0) -> Catalog:
        """The union of `listings` (in config order); NameCollision naming every clash and the prefix to add."""
        listings = tuple(listings)
        clashes: list[Collision] = []
        left_out: list[LeftOut] = []
        tools = _union(
            listings,
            "tool",
            lambda s: _well_named(s, left_out),
            lambda spec, t: spec.exposed_name(t.name),
            clashes,
        )
        prompts = _union(listings, "prompt", lambda s: s.prompts, lambda spec, p: spec.exposed_name(p.name), clashes)
        resources = _union(
            listings, "resource", lambda s: s.resources, lambda spec, r: exposed_uri(spec, r.uri), clashes
        )
        templates = _union(
            listings,
            "resource template",
            lambda s: s.templates,
            lambda spec, t: exposed_uri(spec, t.uri_template),
            clashes,
        )
        if clashes:
            raise NameCollision(clashes)
        return cls(
            tools={name: ExposedTool(name, server, t, definition_hash(t)) for name, (server, t) in tools.items()},
            prompts={name: ExposedPrompt(name, server, p) for name, (server, p) in prompts.items()},
            resources={uri: ExposedResource(uri, server, r) for uri, (server, r) in resources.items()},
            templates={uri: ExposedTemplate(uri, server, t) for uri, (server, t) in templates.items()},
            listings=listings,
            generation=generation,
            left_out=tuple(left_out),
        )

    @property
    def instructions(self) -> str | None:
        """Each downstream's instructions as a block labelled with its server, in config order."""
        blocks = [
            f'Instructions from the MCP server "{listing.spec.name}":\n{listing.instructions.strip()}'
            for listing in self.listings
            if listing.instructions and listing.instructions.strip()
        ]
        return "\n\n".join(blocks) or None

    @property
    def offers_prompts(self) -> bool:
        return any(listing.offers_prompts for listing in self.listings)

    @property
    def offers_resources(self) -> bool:
        return any(listing.offers_resources for listing in self.listings)

    def with_listing(self, listing: ServerListing, order: Sequence[str]) -> Catalog:
        """A new catalog with one server's listing replaced (or added, for a server that connected later); raises
        NameCollision and leaves this one untouched."""
        others = {item.spec.name: item for item in self.listings if item.spec.name != listing.spec.name}
        others[listing.spec.name] = listing
        return Catalog.build((others[name] for name in order if name in others), generation=self.generation + 1)

    def listed_resource(self, uri: str) -> dict[str, Any]:
        """What is listed for a URI a client reads (the resource, else a template it matches) as JSON; {} if none."""
        if (listed := self.resources.get(uri)) is not None:
            return listed.resource.model_dump(by_alias=True, exclude_none=True, mode="json")
        for template in self.templates.values():
            if _matches(template, uri):
                return template.template.model_dump(by_alias=True, exclude_none=True, mode="json")
        return {}

    def resource_route(self, uri: str) -> tuple[str, str] | None:
        """(server, downstream URI) for a URI the client reads, or None when no downstream serves it."""
        if (listed := self.resources.get(uri)) is not None:
            return listed.server, listed.resource.uri
        for listing in self.listings:
            prefix = listing.spec.prefix
            if prefix and uri.startswith(f"{prefix}+") and listing.offers_resources:
                return listing.spec.name, uri[len(prefix) + 1 :]
        matches = {
            tpl.server for tpl in self.templates.values() if not _spec_prefix(self, tpl.server) and _matches(tpl, uri)
        }
        if len(matches) == 1:
            return matches.pop(), uri
        # A resource link in a tool result names the downstream URI; accept it when exactly one server lists it.
        raw = {r.server for r in self.resources.values() if r.resource.uri == uri}
        if len(raw) == 1:
            return raw.pop(), uri
        return None


def _well_named(listing: ServerListing, left_out: list[LeftOut]) -> list[types.Tool]:
    """The listing's tools whose exposed names MCP allows; the others are added to `left_out`."""
    kept = []
    for tool in listing.tools:
        exposed = listing.spec.exposed_name(tool.name)
        if validate_tool_name(exposed).is_valid:
            kept.append(tool)
            continue
        if not exposed:
            why = "its name is empty"
        elif len(exposed) > 128:
            why = f"its name is {len(exposed)} characters long"
        else:
            why = "its name holds characters MCP does not allow in a tool name"
        left_out.append(
            LeftOut(
                listing.spec.name,
                short_name(exposed),
                f"{why} (MCP tool names are 1 to 128 of A-Z, a-z, 0-9, _, - and .); agents never see it",
            )
        )
    return kept


def _spec_prefix(catalog: Catalog, server: str) -> str:
    return next((item.spec.prefix for item in catalog.listings if item.spec.name == server), "")


def _matches(template: ExposedTemplate, uri: str) -> bool:
    try:
        return UriTemplate.parse(template.template.uri_template).match(uri) is not None
    except InvalidUriTemplate:
        return False


def _union(
    listings: Sequence[ServerListing],
    kind: str,
    items: Callable[[ServerListing], Iterable[T]],
    exposed: Callable[[ServerSpec, T], str],
    collisions: list[Collision],
) -> dict[str, tuple[str, T]]:
    union: dict[str, tuple[str, T]] = {}
    owners: dict[str, ServerSpec] = {}
    for listing in listings:
        for item in items(listing):
            name = exposed(listing.spec, item)
            if name in owners:
                collisions.append(Collision(kind, name, owners[name], listing.spec))
                continue
            owners[name] = listing.spec
            union[name] = (listing.spec.name, item)
    return union


# --- pagination -------------------------------------------------------------------------------------------------


def page(items: Sequence[T], cursor: str | None, generation: int, size: int = PAGE_SIZE) -> tuple[list[T], str | None]:
    """One page of `items` and the cursor of the next (None on the last page). A cursor from an older catalog is
    refused (-32602): the list changed under it and continuing would skip or repeat items."""
    start = 0 if cursor is None else _offset(cursor, generation)
    end = start + size
    following = _cursor(end, generation) if end < len(items) else None
    return list(items[start:end]), following


def _cursor(offset: int, generation: int) -> str:
    return base64.urlsafe_b64encode(json.dumps({"g": generation, "o": offset}).encode()).decode()


def _offset(cursor: str, generation: int) -> int:
    try:
        decoded = json.loads(base64.urlsafe_b64decode(cursor.encode()))
        offset, seen = int(decoded["o"]), int(decoded["g"])
    except (ValueError, KeyError, TypeError, binascii.Error):
        raise MCPError(
            INVALID_PARAMS, "Invalid cursor: it was not issued by this proxy. List again without a cursor."
        ) from None
    if seen != generation or offset < 0:
        raise MCPError(
            INVALID_PARAMS,
            "The list changed since this cursor was issued (a downstream server changed what it offers). List again "
            "from the start, without a cursor.",
        )
    return offset
