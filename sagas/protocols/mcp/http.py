"""MCP over Streamable HTTP at /mcp: the SDK's app behind our bearer authentication and Host/Origin checks."""

from __future__ import annotations

from urllib.parse import urlsplit

from django.conf import settings
from mcp.server.transport_security import TransportSecuritySettings

from governance.identity.http import BearerAuth, request_principal
from sagas.protocols.mcp.server import SagaServer, build_server

LOOPBACK = ("127.0.0.1", "localhost", "[::1]")


def transport_security() -> TransportSecuritySettings:
    """Allowed Host and Origin values from our settings: never the SDK's localhost-only default, which would answer
    421 to every request behind a real host name."""
    hosts = [h for h in settings.ALLOWED_HOSTS if h != "testserver"]
    if "*" in hosts:
        return TransportSecuritySettings(enable_dns_rebinding_protection=False)
    # A Host header may carry a port or not (behind a proxy on 80/443): allow both forms.
    allowed_hosts = [pattern for host in hosts for pattern in (host, f"{host}:*")]
    origins = list(settings.SAGA_ALLOWED_ORIGINS)
    if not origins:
        public = urlsplit(settings.SAGA_PUBLIC_URL)
        origins = [f"{public.scheme}://{public.netloc}"]
        origins += [f"{scheme}://{host}:*" for host in LOOPBACK for scheme in ("http", "https")]
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True, allowed_hosts=allowed_hosts, allowed_origins=origins
    )


def build_http_app() -> tuple[BearerAuth, SagaServer]:
    """(the authenticated ASGI endpoint for /mcp, the SDK server whose session manager the lifespan must run)."""
    server = build_server(request_principal)
    sdk_app = server.streamable_http_app(
        streamable_http_path="/mcp",
        stateless_http=False,
        json_response=False,
        transport_security=transport_security(),
        max_request_body_size=settings.SAGA_MAX_REQUEST_BYTES,
    )
    return BearerAuth(sdk_app, protocol="mcp", resource_path="/mcp"), server
