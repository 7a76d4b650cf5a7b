"""Sagas as MCP resources on Semantic Saga's own MCP server: reads, subscriptions, logging and completion.

`saga://{saga_id}` (get_saga: state and DAG), `saga://{saga_id}/timeline` (get_saga_timeline),
`saga://{saga_id}/audit` (get_audit_events) and `action://{action_id}` (get_action), read through the operation table
for the caller (reads). Subscriptions (resources/subscribe in 2025-11-25, subscriptions/listen in 2026-07-28) and
logging/setLevel are served from committed rows by the watcher (watch, marks), so a change made by any process
reaches the subscriber. completion/complete completes saga and action ids (completion). docs/mcp.md describes them.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from typing import Any

import anyio
import mcp.types as types
from mcp.server import Server, ServerRequestContext
from mcp.server.subscriptions import ListenHandler
from mcp.shared.exceptions import MCPError
from mcp_types.jsonrpc import INVALID_PARAMS

from governance.errors import ServiceError
from governance.identity.principal import Principal
from sagas.protocols.mcp.resources import completion, reads
from sagas.protocols.mcp.resources.watch import Watch
from sagas.protocols.orm import run_orm
from sagas.selectors.sagas import saga_get

Context = ServerRequestContext[Any]


def serve_saga_resources(
    server: Server[Any],
    principal_for_request: Callable[[], Principal],
    prompts: Mapping[str, frozenset[str]] | None = None,
) -> Callable[[], contextlib.AbstractAsyncContextManager[None]]:
    """Register the resource, subscription, logging and completion handlers on `server` (`prompts`: the server's
    prompts and their argument names, which completion knows but has no suggestions for); returns the factory of
    the context manager that runs the watcher for the server's lifetime."""
    watch = Watch()
    handlers = _Handlers(watch, principal_for_request, dict(prompts or {}))
    server.add_request_handler("resources/list", types.PaginatedRequestParams, handlers.list_resources)
    server.add_request_handler("resources/templates/list", types.PaginatedRequestParams, handlers.list_templates)
    server.add_request_handler("resources/read", types.ReadResourceRequestParams, handlers.read_resource)
    server.add_request_handler("resources/subscribe", types.SubscribeRequestParams, handlers.subscribe)
    server.add_request_handler("resources/unsubscribe", types.UnsubscribeRequestParams, handlers.unsubscribe)
    server.add_request_handler("subscriptions/listen", types.SubscriptionsListenRequestParams, handlers.listen)
    # Registered here, not as a constructor argument: the constructor warns that logging is deprecated in
    # 2026-07-28, but handshake-era clients still set their level with it.
    server.add_request_handler("logging/setLevel", types.SetLevelRequestParams, handlers.set_level)
    server.add_request_handler("completion/complete", types.CompleteRequestParams, handlers.complete)

    @contextlib.asynccontextmanager
    async def running() -> AsyncIterator[None]:
        async with anyio.create_task_group() as group:
            group.start_soon(watch.run)
            try:
                yield
            finally:
                group.cancel_scope.cancel()

    return running


class _Handlers:
    def __init__(
        self, watch: Watch, principal_for_request: Callable[[], Principal], prompts: dict[str, frozenset[str]]
    ) -> None:
        self.watch = watch
        self.principal = principal_for_request
        self.prompts = prompts
        self._listen = ListenHandler(watch.bus)

    async def list_resources(self, ctx: Context, params: types.PaginatedRequestParams) -> types.ListResourcesResult:
        with _refusals(None, ctx):
            return await run_orm(reads.listing, self.principal(), params.cursor)

    async def list_templates(
        self, ctx: Context, params: types.PaginatedRequestParams
    ) -> types.ListResourceTemplatesResult:
        # The same four templates for everyone, for the life of this server version.
        return types.ListResourceTemplatesResult(resource_templates=reads.templates(), ttl_ms=0, cache_scope="public")

    async def read_resource(self, ctx: Context, params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
        uri = str(params.uri)
        if reads.parse(uri) is None:
            raise reads.not_found(uri, ctx.protocol_version, _SHAPES)
        with _refusals(uri, ctx):
            return await run_orm(reads.read, self.principal(), uri)

    async def subscribe(self, ctx: Context, params: types.SubscribeRequestParams) -> types.EmptyResult:
        uri = str(params.uri)
        saga_ids = await self._visible_sagas(ctx, [uri])
        client = self.watch.client(ctx, self.principal())
        await self.watch.watch(saga_ids)
        client.uris.add(uri)
        return types.EmptyResult()

    async def unsubscribe(self, ctx: Context, params: types.UnsubscribeRequestParams) -> types.EmptyResult:
        self.watch.client(ctx, self.principal()).uris.discard(str(params.uri))
        return types.EmptyResult()

    async def listen(self, ctx: Context, params: types.SubscriptionsListenRequestParams) -> Any:
        """subscriptions/listen with each saga URI tenant-checked first; the SDK's handler serves the stream."""
        saga_ids = await self._visible_sagas(ctx, list(params.notifications.resource_subscriptions or ()))
        await self.watch.watch(saga_ids)
        self.watch.listening(saga_ids)
        try:
            return await self._listen(ctx, params)
        finally:
            self.watch.stopped_listening(saga_ids)

    async def set_level(self, ctx: Context, params: types.SetLevelRequestParams) -> types.EmptyResult:
        self.watch.log_level(self.watch.client(ctx, self.principal()), params.level)
        return types.EmptyResult()

    async def complete(self, ctx: Context, params: types.CompleteRequestParams) -> types.CompleteResult:
        with _refusals(None, ctx):
            return await run_orm(completion.complete, self.principal(), params, self.prompts)

    async def _visible_sagas(self, ctx: Context, uris: list[str]) -> set[str]:
        """The saga ids behind `uris`, each readable by the caller; anything else is refused, naming the URI."""
        saga_ids: set[str] = set()
        for uri in uris:
            target = reads.parse(uri)
            if target is None:
                raise reads.not_found(uri, ctx.protocol_version, _SHAPES)
            if target.saga_id is None:
                raise MCPError(
                    INVALID_PARAMS,
                    f"{uri} sends no updates: only saga resources (saga://{{saga_id}}, /timeline, /audit) can be "
                    "subscribed to. Read action contracts with resources/read when you need them.",
                    data={"uri": uri},
                )
            canonical = reads.canonical(uri)
            if canonical != uri:
                # Updates go out under the URI as resources/list and get_saga write it; another spelling of the
                # same id would be accepted here and then never hear a thing.
                raise MCPError(
                    INVALID_PARAMS,
                    f"{uri} is not how this saga's URI is written, so no update would reach it: subscribe to "
                    f"{canonical} (the saga id as get_saga and resources/list give it: lowercase, with dashes).",
                    data={"uri": uri, "use": canonical},
                )
            with _refusals(uri, ctx):
                await run_orm(saga_get, actor=self.principal(), saga_id=target.saga_id)
            saga_ids.add(target.saga_id)
        return saga_ids


_SHAPES = (
    "Semantic Saga serves saga://{saga_id}, saga://{saga_id}/timeline, saga://{saga_id}/audit and "
    "action://{action_id}; resources/list shows your sagas and completion/complete completes their ids."
)


@contextlib.contextmanager
def _refusals(uri: str | None, ctx: Context) -> Iterator[None]:
    try:
        yield
    except ServiceError as refusal:
        raise reads.protocol_error(refusal, uri, ctx.protocol_version) from None
