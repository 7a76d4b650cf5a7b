"""Reading what a downstream offers: every page of tools/list, prompts/list, resources/list and
resources/templates/list, each request bounded by a timeout and the walk bounded by a page cap."""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable
from typing import Literal, TypedDict, TypeVar

import anyio
import mcp.types as types
from mcp import ClientSession
from pydantic import BaseModel

from sagas.protocols.proxy.catalog import ServerListing
from sagas.protocols.proxy.specs import ServerSpec

# A misbehaving server whose cursor never ends cannot hold the proxy: 100 pages is far beyond any real listing.
MAX_PAGES = 100

Kind = Literal["tools", "prompts", "resources"]


class Fresh(TypedDict, total=False):
    """The ServerListing fields one kind's re-reading replaces."""

    tools: tuple[types.Tool, ...]
    prompts: tuple[types.Prompt, ...]
    resources: tuple[types.Resource, ...]
    templates: tuple[types.ResourceTemplate, ...]


ResultT = TypeVar("ResultT", bound=BaseModel)
ItemT = TypeVar("ItemT")


async def _every_page(
    fetch: Callable[[str | None], Awaitable[ResultT]],
    items: Callable[[ResultT], list[ItemT]],
    timeout: float,
) -> tuple[ItemT, ...]:
    collected: list[ItemT] = []
    cursor: str | None = None
    for _ in range(MAX_PAGES):
        with anyio.fail_after(timeout):
            result = await fetch(cursor)
        collected.extend(items(result))
        cursor = getattr(result, "next_cursor", None)
        if cursor is None:
            break
    return tuple(collected)


def _params(cursor: str | None) -> types.PaginatedRequestParams | None:
    return types.PaginatedRequestParams(cursor=cursor) if cursor is not None else None


async def list_tools(session: ClientSession, timeout: float) -> tuple[types.Tool, ...]:
    return await _every_page(lambda c: session.list_tools(params=_params(c)), lambda r: r.tools, timeout)


async def list_prompts(session: ClientSession, timeout: float) -> tuple[types.Prompt, ...]:
    return await _every_page(lambda c: session.list_prompts(params=_params(c)), lambda r: r.prompts, timeout)


async def list_resources(
    session: ClientSession, timeout: float
) -> tuple[tuple[types.Resource, ...], tuple[types.ResourceTemplate, ...]]:
    resources = await _every_page(lambda c: session.list_resources(params=_params(c)), lambda r: r.resources, timeout)
    templates = await _every_page(
        lambda c: session.list_resource_templates(params=_params(c)), lambda r: r.resource_templates, timeout
    )
    return resources, templates


async def first_listing(
    session: ClientSession, spec: ServerSpec, init: types.InitializeResult, timeout: float
) -> ServerListing:
    """Everything the server offers right after initialize, per the capabilities it declared."""
    listing = ServerListing(
        spec=spec,
        instructions=init.instructions,
        offers_prompts=init.capabilities.prompts is not None,
        offers_resources=init.capabilities.resources is not None,
    )
    for kind in ("tools", "prompts", "resources"):
        listing = dataclasses.replace(listing, **await fetch(session, kind, init.capabilities, timeout))
    return listing


async def fetch(session: ClientSession, kind: Kind, capabilities: types.ServerCapabilities, timeout: float) -> Fresh:
    """One kind read again, as the ServerListing fields it replaces (nothing for a kind the server did not
    declare). The caller applies them to its listing as it is when the answer arrives: two kinds re-read at
    once must not undo each other."""
    if kind == "tools" and capabilities.tools is not None:
        return {"tools": await list_tools(session, timeout)}
    if kind == "prompts" and capabilities.prompts is not None:
        return {"prompts": await list_prompts(session, timeout)}
    if kind == "resources" and capabilities.resources is not None:
        resources, templates = await list_resources(session, timeout)
        return {"resources": resources, "templates": templates}
    return {}
