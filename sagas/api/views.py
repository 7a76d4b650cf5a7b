"""REST views, built from the operation table: one view class per path, one method per operation on it.

A method parses the body (POST) or the query string (GET) with the operation's argument model, adds what the URL
carries, invokes the operation (RBAC, handler) and answers with the route's status. No view writes to the ORM or
holds workflow logic, so a REST client can do exactly what an MCP client with the same token can, no more.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.urls import Resolver404, resolve, reverse
from drf_spectacular.utils import extend_schema
from rest_framework import exceptions
from rest_framework.authentication import BaseAuthentication
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from sagas.api.authentication import request_principal
from sagas.api.inputs import body_args, query_args
from sagas.api.schema import documentation
from sagas.operations.invoke import invoke
from sagas.operations.operation import Operation, Route
from sagas.operations.schemas import OUT_SAGA
from sagas.operations.table import REST_ROUTES

Endpoint = Callable[..., Response]


class OperationView(APIView):
    # Authentication, permission, parsers, renderers and the error handler come from settings.REST_FRAMEWORK
    # (no docstring: drf-spectacular and the browsable API would show it for every operation).
    pass


def routes() -> list[tuple[str, str, type[APIView]]]:
    """(path, URL name, view class) for each path of the table's REST routes, in the table's order."""
    by_path: dict[str, list[tuple[Operation[Any], Route]]] = {}
    for operation, route in REST_ROUTES:
        by_path.setdefault(route.path, []).append((operation, route))
    return [(path, served[0][1].name, view_for(served)) for path, served in by_path.items()]


def view_for(served: list[tuple[Operation[Any], Route]]) -> type[APIView]:
    """The view class of one path: a `get` or `post` per operation, documented from the table."""
    name = served[0][1].name
    methods: dict[str, Endpoint] = {}
    for operation, route in served:
        assert route.name == name, f"{operation.name}: the operations of one path share its URL name {name}"
        assert route.method.lower() not in methods, f"{name}: two operations answer {route.method}"
        methods[route.method.lower()] = extend_schema(**documentation(operation, route))(_endpoint(operation, route))
    class_name = "".join(part.capitalize() for part in name.split("-")) + "View"
    return type(class_name, (OperationView,), methods)


def _endpoint(operation: Operation[Any], route: Route) -> Endpoint:
    def endpoint(view: APIView, request: Request, **url: str) -> Response:
        return answer(request, operation, route, url)

    endpoint.__name__ = operation.name
    return endpoint


def answer(request: Request, operation: Operation[Any], route: Route, url: dict[str, str]) -> Response:
    if route.method == "GET":
        arguments = query_args(request, operation.arguments, **url)
    else:
        arguments = body_args(request, operation.arguments, fixed=dict(route.fixed), **url)
    result = invoke(operation, request_principal(request), arguments)
    headers = {}
    if route.status == 201 and operation.output is OUT_SAGA:
        # A created saga (begin, promote) is a resource of its own: say where it lives.
        headers["Location"] = reverse("sagas_api:saga-detail", kwargs={"saga_id": result["id"]})
    return Response(result, status=route.status, headers=headers)


@extend_schema(exclude=True)
class UnknownEndpoint(APIView):
    """Any other path under /api/v1/: a JSON 404 pointing to the docs, whatever the method."""

    authentication_classes: list[type[BaseAuthentication]] = []
    permission_classes = [AllowAny]

    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        hint = ""
        if not request.path.endswith("/"):
            try:
                match = resolve(request.path + "/")
            except Resolver404:
                pass
            else:
                hint = f" (paths end with a slash: {request.path}/)" if match.url_name != "unknown" else ""
        raise exceptions.NotFound(f"There is no endpoint {request.path}{hint}")

    post = put = patch = delete = options = get
