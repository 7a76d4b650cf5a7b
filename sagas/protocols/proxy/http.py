"""The proxy over Streamable HTTP at /proxy/mcp: the SDK's app behind the bearer authentication, tenancy and roles
of /mcp, both protocol eras (2025-11-25 sessions, 2026-07-28 stateless requests) on one endpoint; a session's plain
calls answered by the fast path in front of it (sagas.protocols.proxy.http_fast) unless SAGA_PROXY_FAST_PATH is
off."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass

from django.conf import settings
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route
from starlette.types import ASGIApp

from governance.identity.http import BearerAuth, request_principal
from sagas.protocols.mcp.http import transport_security
from sagas.protocols.proxy.config import load_proxy_config
from sagas.protocols.proxy.durable import DurableCallPath
from sagas.protocols.proxy.http_fast import FastHttpEndpoint
from sagas.protocols.proxy.runtime import Proxy, build_proxy, journaled

PATH = "/proxy/mcp"


@dataclass(frozen=True)
class ProxyHttpApp:
    endpoint: ASGIApp  # for /proxy/mcp: bearer auth, then the SDK's Streamable HTTP app
    public_routes: list[BaseRoute]  # the OAuth resource metadata the 401 challenge points to (JWT mode)
    proxy: Proxy

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """For the server's lifespan: connect the downstreams, then accept clients."""
        async with self.proxy.running(), self.proxy.server.session_manager.run():
            yield


async def _resource_metadata(request: Request) -> Response:
    from governance.identity.authentication import (
        NO_RESOURCE_METADATA,
        protected_resource_metadata,
        resource_metadata_served,
    )

    if not resource_metadata_served():
        return JSONResponse({"error": "not_found", "error_description": NO_RESOURCE_METADATA}, status_code=404)
    return JSONResponse(protected_resource_metadata(PATH))


def build_proxy_http_app(config_path: str) -> ProxyHttpApp:
    proxy = build_proxy(load_proxy_config(config_path), request_principal, call_path=journaled)
    sdk_app = proxy.server.streamable_http_app(
        streamable_http_path=PATH,
        stateless_http=False,
        json_response=False,
        transport_security=transport_security(),
        max_request_body_size=settings.SAGA_MAX_REQUEST_BYTES,
    )
    endpoint: ASGIApp = sdk_app
    if settings.SAGA_PROXY_FAST_PATH and isinstance(proxy.call_path, DurableCallPath):
        endpoint = FastHttpEndpoint(
            sdk_app,
            proxy.server,
            proxy.call_path,
            request_principal,
            path_served=PATH,
            max_body_bytes=settings.SAGA_MAX_REQUEST_BYTES,
        )
    return ProxyHttpApp(
        endpoint=BearerAuth(endpoint, protocol="mcp-proxy", resource_path=PATH),
        public_routes=[Route(f"/.well-known/oauth-protected-resource{PATH}", endpoint=_resource_metadata)],
        proxy=proxy,
    )
