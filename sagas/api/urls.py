"""/api/v1/: the REST API (docs/rest_api.md), one route per path of the operation table, its OpenAPI schema and
browsable docs."""

from __future__ import annotations

from django.urls import path, re_path
from drf_spectacular.views import SpectacularAPIView, SpectacularRedocView, SpectacularSwaggerView
from rest_framework.permissions import AllowAny

from sagas.api import schema as _schema  # noqa: F401 - registers the security scheme extensions
from sagas.api import views

app_name = "sagas_api"


urlpatterns = [
    *(path(route, view.as_view(), name=name) for route, name, view in views.routes()),
    # The schema and docs are public: they describe the API, never its data.
    path("schema/", SpectacularAPIView.as_view(permission_classes=[AllowAny]), name="schema"),
    path(
        "docs/",
        SpectacularSwaggerView.as_view(url_name="sagas_api:schema", permission_classes=[AllowAny]),
        name="docs",
    ),
    path(
        "redoc/",
        SpectacularRedocView.as_view(url_name="sagas_api:schema", permission_classes=[AllowAny]),
        name="redoc",
    ),
    # Anything else under /api/v1/ answers a JSON 404 (not Django's HTML page) that points to the docs.
    re_path(r"^.*$", views.UnknownEndpoint.as_view(), name="unknown"),
]
