from __future__ import annotations

from django.contrib import admin
from django.urls import include, path

from saga_project.views import healthz, landing, protected_resource_metadata

urlpatterns = [
    path("", landing, name="landing"),
    path("healthz", healthz, name="healthz"),
    path(
        ".well-known/oauth-protected-resource/mcp",
        protected_resource_metadata,
        name="oauth-protected-resource-mcp",
    ),
    path("admin/", admin.site.urls),
    path("api/v1/", include("sagas.api.urls")),
    # Operator single sign-on; the views answer 404 until OIDC is configured (governance.identity.oidc).
    path("oidc/", include("mozilla_django_oidc.urls")),
]
