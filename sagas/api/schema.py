"""OpenAPI details drf-spectacular cannot infer: our security schemes and the shared response components."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.openapi import AutoSchema

from sagas.api.serializers import COMPONENTS


class BearerTokenScheme(OpenApiAuthenticationExtension):  # type: ignore[no-untyped-call]
    target_class = "sagas.api.authentication.BearerTokenAuthentication"
    name = "bearerAuth"

    def get_security_definition(self, auto_schema: AutoSchema) -> dict[str, Any]:
        return {
            "type": "http",
            "scheme": "bearer",
            "description": "A static token (SAGA_AUTH_MODE=static) or a JWT from your identity provider "
            "(SAGA_AUTH_MODE=jwt): the same tokens /mcp and /a2a accept. Roles viewer < operator < admin, or "
            "scopes semantic-saga:read|execute|admin, decide what each endpoint allows.",
        }


class ConsoleSessionScheme(OpenApiAuthenticationExtension):  # type: ignore[no-untyped-call]
    target_class = "sagas.api.authentication.ConsoleSessionAuthentication"
    name = "consoleSession"

    def get_security_definition(self, auto_schema: AutoSchema) -> dict[str, Any]:
        return {
            "type": "apiKey",
            "in": "cookie",
            "name": settings.SESSION_COOKIE_NAME,
            "description": "A logged-in admin console session (browsable API); unsafe methods need the CSRF token.",
        }


def add_components(result: dict[str, Any], generator: Any, request: Any, public: bool) -> dict[str, Any]:
    """POSTPROCESSING_HOOKS entry: the response schemas the views refer to by name."""
    schemas = result.setdefault("components", {}).setdefault("schemas", {})
    for name, schema in COMPONENTS.items():
        schemas.setdefault(name, schema)
    return result
