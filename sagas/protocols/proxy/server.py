"""The proxy's MCP server: the SDK's low-level Server (as sagas.protocols.mcp.server), answering for every downstream.

initialize and discovery are answered here: tools (with listChanged), and prompts and resources when a downstream
offers them; the instructions are the downstreams', each block labelled with its server (in preview, after a
notice that nothing reaches the world: PREVIEW_NOTICE). tools/list is the paginated catalog; tools/call becomes a
ProxiedCall for the CallPath, prompts/get and resources/read a ProxiedRead (journaled on the durable path, then
forwarded to their downstream). A change in the catalog is passed on: `notifications/*/list_changed` to every
2025-11-25 client connection, and to 2026-07-28 clients through their subscriptions/listen streams.
"""

from __future__ import annotations

import contextlib
import logging
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import mcp.types as types
from mcp.server import ServerRequestContext
from mcp.server.connection import Connection
from mcp.server.session import ServerSession
from mcp.server.subscriptions import (
    InMemorySubscriptionBus,
    ListenHandler,
    PromptsListChanged,
    ResourcesListChanged,
    ServerEvent,
    ToolsListChanged,
)
from mcp.shared.exceptions import MCPError
from mcp_types.jsonrpc import INTERNAL_ERROR, INVALID_PARAMS, INVALID_REQUEST
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from governance.identity.principal import Principal
from governance.identity.rbac import READ, can
from sagas.protocols.mcp.resources.capabilities import DeclaringServer
from sagas.protocols.mcp.resources.reads import RESOURCE_NOT_FOUND, not_found
from sagas.protocols.mcp.tasks.methods import serve_tasks
from sagas.protocols.mcp.tasks.service import TaskService
from sagas.protocols.mcp.tasks.wire import LEGACY
from sagas.protocols.proxy.calls import CallPath, ClientIdentity, ProxiedCall, ProxiedRead
from sagas.protocols.proxy.catalog import PAGE_SIZE, Catalog, exposed_uri, page, short_name
from sagas.protocols.proxy.downstream import DownstreamLost, DownstreamManager, DownstreamUnavailable, ResultTooLarge
from sagas.protocols.proxy.elicited import can_ask
from sagas.protocols.proxy.relay import RequestRelay

logger = logging.getLogger("sagas.protocols.proxy")

SERVER_NAME = "semantic-saga-proxy"
SERVER_VERSION = "0.1.0"
# The spec's error code for a resource no server has (resources/read).
# Unknown-name errors list at most this many names: enough to spot a typo, short enough to read.
NAMES_SHOWN = 50
_CLIENT_KEY = "semantic-saga.proxy.client_key"
# The request _meta keys that belong to the client's own connection, not to the downstream call.
_OWN_META = ("progressToken",)
ENVELOPE_PREFIX = "io.modelcontextprotocol/"

_LIST_CHANGED: dict[str, tuple[str, ServerEvent]] = {
    "tools": ("notifications/tools/list_changed", ToolsListChanged()),
    "prompts": ("notifications/prompts/list_changed", PromptsListChanged()),
    "resources": ("notifications/resources/list_changed", ResourcesListChanged()),
}
# What the agent is told at the start of a preview session (MCP `instructions`), before any call.
PREVIEW_NOTICE = (
    "PREVIEW SESSION (a dry run): nothing you do in this session reaches the real world. Tools that only read are "
    "called and answered as usual; every other call is recorded but NOT executed, and its answer says so, with what "
    "would have happened outside preview. Keep planning as if those calls had worked, do not rely on their results, "
    "and do not try to make them run another way."
)


def _connection_of(session: ServerSession) -> Connection:
    # The SDK hands low-level handlers a per-request ServerSession that keeps its Connection private; the proxy
    # needs the connection itself: its identity (state), its standalone channel (to pass list_changed on) and its
    # teardown (to forget it).
    connection: Connection = session._connection
    return connection


class ConnectedClients:
    """The 2025-11-25 client connections (they get list_changed on their standalone channel) and per-connection
    settings (the logging/setLevel level)."""

    def __init__(self) -> None:
        self._connections: dict[str, Connection] = {}
        self.log_levels: dict[str, types.LoggingLevel] = {}
        # The connection that finished its handshake last, with who it is: on stdio, the agent's only one (the fast
        # path, sagas.protocols.proxy.fast_calls, answers its plain calls without an SDK request context).
        self.latest: tuple[ClientIdentity, Connection] | None = None
        # Over Streamable HTTP, each 2025-11-25 session's connection by its MCP session id, from its handshake until
        # it ends (the HTTP fast path, sagas.protocols.proxy.http_fast, answers its plain calls).
        self.by_session: dict[str, tuple[ClientIdentity, Connection]] = {}

    def identity(self, ctx: ServerRequestContext[Any]) -> ClientIdentity:
        connection = _connection_of(ctx.session)
        key = connection.state.get(_CLIENT_KEY)
        if key is None:
            key = connection.state[_CLIENT_KEY] = uuid.uuid4().hex
            self._remember(key, connection)
        info = connection.client_params.client_info if connection.client_params else None
        return ClientIdentity(
            key=key,
            session_id=connection.session_id,
            protocol_version=ctx.protocol_version,
            stateless=ctx.protocol_version in MODERN_PROTOCOL_VERSIONS,
            client_name=info.name if info else None,
            client_version=info.version if info else None,
        )

    def _remember(self, key: str, connection: Connection) -> None:
        if connection.protocol_version in MODERN_PROTOCOL_VERSIONS or not connection.has_standalone_channel:
            return  # 2026-07-28 clients hear of changes through subscriptions/listen

        def forget() -> None:
            self._connections.pop(key, None)
            self.log_levels.pop(key, None)

        self._connections[key] = connection
        connection.exit_stack.callback(forget)

    def initialized(self, client: ClientIdentity, connection: Connection) -> None:
        """`connection` finished its handshake: the latest, and (over HTTP) found by its session id."""
        self.latest = (client, connection)
        session_id = connection.session_id
        if session_id is None or client.stateless:
            return
        self.by_session[session_id] = (client, connection)

        def forget() -> None:
            if self.by_session.get(session_id, (None, None))[1] is connection:
                del self.by_session[session_id]

        connection.exit_stack.callback(forget)

    async def notify_all(self, method: str) -> None:
        for connection in list(self._connections.values()):
            await connection.outbound.notify(method, None)  # best effort: never raises


class ProxyServer(DeclaringServer):
    """The low-level server whose capabilities follow what the downstreams offer."""

    sends_list_changed = True  # the downstreams' list_changed notifications are passed on

    def __init__(self, downstreams: DownstreamManager, **handlers: Any) -> None:
        super().__init__(SERVER_NAME, version=SERVER_VERSION, title="Semantic Saga proxy", **handlers)
        self.downstreams = downstreams
        self.page_size = PAGE_SIZE  # items per list page sent to the client
        self.tasks_served = False  # tasks/* served (the call path answers held calls with MCP tasks)
        self.clients = ConnectedClients()  # replaced by build_proxy_server with the one its handlers use

    def offered(self, capabilities: types.ServerCapabilities) -> types.ServerCapabilities:
        catalog = self.downstreams.catalog
        resources = capabilities.resources
        return capabilities.model_copy(
            update={
                "prompts": capabilities.prompts if catalog.offers_prompts else None,
                # Resource subscriptions are not relayed: the downstream sessions are shared by every client.
                "resources": resources.model_copy(update={"subscribe": False})
                if resources is not None and catalog.offers_resources
                else None,
            }
        )


def build_proxy_server(
    downstreams: DownstreamManager,
    call_path: CallPath,
    principal_for_request: Callable[[], Principal],
) -> ProxyServer:
    """The proxy's SDK server. `principal_for_request()` returns the Principal of the request being served."""
    clients = ConnectedClients()
    bus = InMemorySubscriptionBus()
    # The durable path holds confirm-gated calls; those of a client that negotiates tasks become MCP tasks.
    tasks, holds = getattr(call_path, "tasks", None), getattr(call_path, "holds", None)

    def catalog() -> Catalog:
        """The catalog, for a caller allowed to read it (any role; a token with no capability at all is not)."""
        principal = principal_for_request()
        if not can(principal, READ):
            raise MCPError(
                INVALID_REQUEST,
                f"{principal.principal_id} holds no role or scope that allows reading; ask an administrator for the "
                "viewer role at least.",
            )
        return downstreams.catalog

    def relay(ctx: ServerRequestContext[Any], client: ClientIdentity) -> RequestRelay:
        return RequestRelay(ctx, client.key, log_level=clients.log_levels.get(client.key))

    async def list_tools(ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None) -> Any:
        current = catalog()
        principal, client = principal_for_request(), clients.identity(ctx)
        listed = [
            _offered(
                t.advertised(),
                holds is not None and ctx.protocol_version == LEGACY and holds(principal, client, t.server, t.tool),
            )
            for t in current.tools.values()
            if not call_path.hidden(principal, client, t.server, t.tool)
        ]
        tools, following = page(listed, _cursor(params), current.generation, server.page_size)
        return types.ListToolsResult(tools=tools, next_cursor=following)

    async def call_tool(ctx: ServerRequestContext[Any], params: types.CallToolRequestParams) -> Any:
        current, principal, client = catalog(), principal_for_request(), clients.identity(ctx)
        exposed = current.tools.get(params.name)
        if exposed is None and await downstreams.relist_stale_tools():  # a server said its tools changed: look again
            current = catalog()
            exposed = current.tools.get(params.name)
        if exposed is None or call_path.hidden(principal, client, exposed.server, exposed.tool):
            # A hidden tool is answered exactly as one no server offers: its existence is not the agent's to learn.
            visible = [n for n, t in current.tools.items() if not call_path.hidden(principal, client, t.server, t.tool)]
            raise _unknown("tool", params.name, visible, "tools/list")
        request = ProxiedCall(
            principal=principal,
            client=client,
            exposed_name=exposed.name,
            server=exposed.server,
            tool=exposed.tool.name,
            definition_hash=exposed.definition_hash,
            definition=exposed.tool,
            arguments=dict(params.arguments or {}),
            meta=forwarded_meta(params.meta),
            relay=relay(ctx, client),
            request_id=ctx.request_id,
            client_elicits=can_ask(ctx.session.client_capabilities)
            and (client.stateless or ctx.session.can_send_request),
            input_responses=dict(params.input_responses) if params.input_responses else None,
            request_state=params.request_state,
        )
        return await call_path.call(request)

    async def list_prompts(ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None) -> Any:
        catalog()  # the caller may read, before the downstreams are asked
        if _cursor(params) is None:
            await downstreams.refresh("prompts")
        current = catalog()
        prompts, following = page(
            [p.advertised() for p in current.prompts.values()], _cursor(params), current.generation, server.page_size
        )
        return types.ListPromptsResult(prompts=prompts, next_cursor=following)

    async def get_prompt(ctx: ServerRequestContext[Any], params: types.GetPromptRequestParams) -> Any:
        exposed = catalog().prompts.get(params.name)
        if exposed is None:
            raise _unknown("prompt", params.name, list(catalog().prompts), "prompts/list")
        client = clients.identity(ctx)

        async def fetch() -> types.GetPromptResult:
            return await downstreams.get_prompt(
                exposed.server, exposed.prompt.name, params.arguments, relay=relay(ctx, client)
            )

        listed = exposed.prompt.model_dump(by_alias=True, exclude_none=True, mode="json")
        arguments = {"name": params.name, "arguments": params.arguments}
        read = ProxiedRead(
            principal_for_request(), client, "prompts/get", exposed.server, params.name, arguments, listed, fetch
        )
        with _as_protocol_errors():
            return await call_path.read(read)

    async def list_resources(ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None) -> Any:
        catalog()  # the caller may read, before the downstreams are asked
        if _cursor(params) is None:
            await downstreams.refresh("resources")
        current = catalog()
        resources, following = page(
            [r.advertised() for r in current.resources.values()], _cursor(params), current.generation, server.page_size
        )
        return types.ListResourcesResult(resources=resources, next_cursor=following)

    async def list_templates(ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None) -> Any:
        current = catalog()
        templates, following = page(
            [t.advertised() for t in current.templates.values()], _cursor(params), current.generation, server.page_size
        )
        return types.ListResourceTemplatesResult(resource_templates=templates, next_cursor=following)

    async def read_resource(ctx: ServerRequestContext[Any], params: types.ReadResourceRequestParams) -> Any:
        current = catalog()
        route = current.resource_route(params.uri)
        if route is None:
            # -32002 for handshake-era clients, -32602 (HTTP 400) in 2026-07-28 (SEP-2164), as /mcp answers.
            why = (
                "No downstream server lists it or a template matching it: resources/list and "
                "resources/templates/list show what can be read."
            )
            raise not_found(str(params.uri), ctx.protocol_version, why)
        server, uri = route
        client = clients.identity(ctx)

        async def fetch() -> types.ReadResourceResult:
            return await downstreams.read_resource(server, uri, relay=relay(ctx, client))

        listed = current.listed_resource(params.uri)
        read = ProxiedRead(
            principal_for_request(), client, "resources/read", server, params.uri, {"uri": params.uri}, listed, fetch
        )
        with _as_protocol_errors(), _not_found_in_era(str(params.uri), ctx.protocol_version):
            result = await call_path.read(read)
        return _with_exposed_uris(current, server, result)

    async def set_level(ctx: ServerRequestContext[Any], params: types.SetLevelRequestParams) -> types.EmptyResult:
        clients.log_levels[clients.identity(ctx).key] = params.level
        return types.EmptyResult()

    async def initialized(ctx: ServerRequestContext[Any], params: types.NotificationParams) -> None:
        client = clients.identity(ctx)  # remember the connection now: list_changed may come before its first request
        clients.initialized(client, _connection_of(ctx.session))
        await call_path.client_initialized(principal_for_request(), client)

    listen = ListenHandler(bus)
    server = ProxyServer(
        downstreams,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_list_prompts=list_prompts,
        on_get_prompt=get_prompt,
        on_list_resources=list_resources,
        on_list_resource_templates=list_templates,
        on_read_resource=read_resource,
        on_subscriptions_listen=listen,
    )
    # Registered here, not as constructor arguments: the constructor warns that logging is deprecated in
    # 2026-07-28, but handshake-era clients still set their level with it.
    server.add_request_handler("logging/setLevel", types.SetLevelRequestParams, set_level)
    server.add_notification_handler("notifications/initialized", types.NotificationParams, initialized)
    server.clients = clients
    if isinstance(tasks, TaskService):
        serve_tasks(server, tasks, principal_for_request)
        server.tasks_served = True

    async def pass_on(kinds: frozenset[str]) -> None:
        server.instructions = session_instructions(downstreams)
        for kind in sorted(kinds & _LIST_CHANGED.keys()):
            method, event = _LIST_CHANGED[kind]
            await clients.notify_all(method)
            await bus.publish(event)

    downstreams.subscribe(pass_on)
    server.instructions = session_instructions(downstreams)
    return server


def session_instructions(downstreams: DownstreamManager) -> str | None:
    """The instructions of `initialize`: in preview, first that nothing reaches the world (each dry call's answer
    says so again), then the downstreams' own."""
    own = downstreams.catalog.instructions
    if not downstreams.config.preview:
        return own
    return PREVIEW_NOTICE + (f"\n\n{own}" if own else "")


def _offered(tool: types.Tool, as_task: bool) -> types.Tool:
    """A tool whose calls may be held is offered as a task to 2025-11-25 clients (they may then ask for one)."""
    return tool.model_copy(update={"execution": types.ToolExecution(task_support="optional")}) if as_task else tool


def _cursor(params: types.PaginatedRequestParams | None) -> str | None:
    return params.cursor if params is not None else None


def forwarded_meta(meta: Any) -> dict[str, Any]:
    if not meta:
        return {}
    plain = dict(meta) if not hasattr(meta, "model_dump") else meta.model_dump(by_alias=True, exclude_none=True)
    return {key: value for key, value in plain.items() if key not in _OWN_META and not key.startswith(ENVELOPE_PREFIX)}


def _unknown(kind: str, name: str, available: list[str], listing: str) -> MCPError:
    """A name the catalog does not hold is the client's protocol error (-32602), as on /mcp: nothing ran. The name
    is echoed only as a short prefix: a client sending a 100,000-character name does not get it back."""
    shown = ", ".join(available[:NAMES_SHOWN]) + (", ..." if len(available) > NAMES_SHOWN else "")
    return MCPError(
        INVALID_PARAMS,
        f"Unknown {kind} {short_name(name)}: nothing was called. {listing} shows the {kind}s the downstream servers "
        "offer" + (f"; they are: {shown}." if available else "; none is available right now."),
        data={kind: short_name(name)},
    )


@contextlib.contextmanager
def _as_protocol_errors() -> Iterator[None]:
    """A downstream that is down, or lost while serving a prompt or a resource read, is a JSON-RPC error."""
    try:
        yield
    except (DownstreamUnavailable, DownstreamLost) as error:
        raise MCPError(INTERNAL_ERROR, f"{error}. Try again in a little while.") from None
    except ResultTooLarge as oversized:
        raise MCPError(
            INTERNAL_ERROR,
            f"The server's answer was not read: {oversized} (SAGA_PROXY_MAX_RESULT_BYTES). Read something smaller.",
        ) from None


@contextlib.contextmanager
def _not_found_in_era(uri: str, protocol_version: str | None) -> Iterator[None]:
    """A downstream answering -32002 for a URI its template matches (the resource does not exist) is passed on in
    the client's era: -32602 (HTTP 400) in 2026-07-28 (SEP-2164), as for a URI no downstream lists."""
    try:
        yield
    except MCPError as error:
        if error.code != RESOURCE_NOT_FOUND or protocol_version not in MODERN_PROTOCOL_VERSIONS:
            raise
        raise not_found(uri, protocol_version, error.message) from None


def _with_exposed_uris(catalog: Catalog, server: str, result: types.ReadResourceResult) -> types.ReadResourceResult:
    spec = next((listing.spec for listing in catalog.listings if listing.spec.name == server), None)
    if spec is None or not spec.prefix:
        return result
    contents = [item.model_copy(update={"uri": exposed_uri(spec, item.uri)}) for item in result.contents]
    return result.model_copy(update={"contents": contents})
