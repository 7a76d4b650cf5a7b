"""The one ASGI app: a Starlette router outside (it owns the lifespan), Django mounted last.

MCP is served at /mcp, A2A at /a2a (its public card at /.well-known/agent-card.json). Django
cannot be the outermost app: it refuses ASGI lifespan scopes, and the MCP session manager needs the lifespan.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import AsyncIterator

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "saga_project.settings")

from django.core.asgi import get_asgi_application

django_app = get_asgi_application()  # runs django.setup(); import our modules only after this

from asgiref.sync import sync_to_async
from django.conf import settings
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Receive, Scope, Send

from sagas.protocols.a2a.http import build_http_app as build_a2a_app
from sagas.protocols.body_limit import BodyLimit
from sagas.protocols.mcp.http import build_http_app
from sagas.protocols.proxy.http import PATH as PROXY_PATH
from sagas.protocols.proxy.http import build_proxy_http_app

logger = logging.getLogger("saga_project.asgi")


def _load_actions_file() -> None:
    from registry.services import registry_load_file

    if settings.SAGA_ACTIONS_FILE:
        report = registry_load_file(settings.SAGA_ACTIONS_FILE)
        logger.info("action registry loaded file=%s %s", settings.SAGA_ACTIONS_FILE, report.summary())


class Endpoint:
    """An ASGI app mounted as a route (a class instance: Starlette's Route treats a plain function as a request
    handler, not an ASGI app). Its ORM work runs on the long-lived threads of sagas.protocols.orm."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.app(scope, receive, send)


mcp_endpoint, mcp_server = build_http_app()
a2a = build_a2a_app()
# The MCP proxy, when SAGA_PROXY_CONFIG names its configuration (checked at start-up: sagas.protocols.proxy.checks).
proxy = build_proxy_http_app(settings.SAGA_PROXY_CONFIG) if settings.SAGA_PROXY_CONFIG else None


@contextlib.asynccontextmanager
async def lifespan(app: Starlette) -> AsyncIterator[None]:
    from sagas.coordinator.execution.nudges import uses_celery
    from sagas.sweeper import EmbeddedSweeper

    await sync_to_async(_load_actions_file, thread_sensitive=False)()
    # Without a broker this process is also the worker, so it also sweeps (Celery beat does it otherwise).
    sweeper = None if uses_celery() else EmbeddedSweeper().start()
    try:
        # The MCP session manager must run for the app's lifetime; mounted apps get no lifespan of their own.
        # The proxy connects its downstream servers before it accepts clients (and refuses to start on a name
        # collision among them).
        proxy_running = proxy.running() if proxy is not None else contextlib.nullcontext()
        async with mcp_server.session_manager.run(), mcp_server.running(), proxy_running:
            try:
                yield
            finally:
                # The SDK tracks running A2A commands in-process: stop them with the process instead of leaving
                # orphaned asyncio tasks. A saga caught mid-step is the coordinator's to recover, as after a crash.
                await a2a.handler.aclose()
    finally:
        if sweeper is not None:
            sweeper.stop()


def _proxy_routes() -> list[BaseRoute]:
    if proxy is None:
        return []
    return [Route(PROXY_PATH, endpoint=Endpoint(proxy.endpoint)), *proxy.public_routes]


def _static_mount() -> list[Mount]:
    # Admin CSS/JS under uvicorn without an extra dependency; `collectstatic` fills STATIC_ROOT.
    root = str(settings.STATIC_ROOT)
    if not os.path.isdir(root):
        return []
    return [Mount("/" + settings.STATIC_URL.strip("/"), app=StaticFiles(directory=root), name="static")]


application = Starlette(
    # Django is typed with its own ASGI protocol; at runtime it is a plain ASGI callable.
    routes=[
        Route("/mcp", endpoint=Endpoint(mcp_endpoint)),  # path passed through unchanged (no 307 to /mcp/)
        *a2a.public_routes,  # the agent card: no authentication
        Route("/a2a", endpoint=Endpoint(a2a.rpc_endpoint)),
        Route("/a2a/", endpoint=Endpoint(a2a.rpc_endpoint)),  # peers that append a slash are served too
        *_proxy_routes(),
        *_static_mount(),
        Mount("/", app=BodyLimit(django_app, settings.SAGA_MAX_REQUEST_BYTES)),  # type: ignore[arg-type]
    ],
    middleware=[Middleware(TrustedHostMiddleware, allowed_hosts=settings.ALLOWED_HOSTS)],
    lifespan=lifespan,
)
