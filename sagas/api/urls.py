"""/api/v1/: the REST API (docs/rest_api.md), its OpenAPI schema and browsable docs."""

from __future__ import annotations

from django.urls import path, re_path
from drf_spectacular.views import SpectacularAPIView, SpectacularRedocView, SpectacularSwaggerView
from rest_framework.permissions import AllowAny

from sagas.api import schema as _schema  # noqa: F401 - registers the security scheme extensions
from sagas.api import views

app_name = "sagas_api"

SAGA = "sagas/<str:saga_id>/"
NODE = SAGA + "nodes/<str:node_id>/"

urlpatterns = [
    path("sagas/", views.SagaCollection.as_view(), name="saga-list"),
    path(SAGA, views.SagaDetail.as_view(), name="saga-detail"),
    path(SAGA + "commit/", views.SagaCommit.as_view(), name="saga-commit"),
    path(SAGA + "rollback/", views.SagaRollback.as_view(), name="saga-rollback"),
    path(SAGA + "checkpoints/", views.SagaCheckpoints.as_view(), name="saga-checkpoints"),
    path(SAGA + "steps/", views.SagaSteps.as_view(), name="saga-steps"),
    path(SAGA + "nodes/", views.SagaNodes.as_view(), name="saga-nodes"),
    path(SAGA + "run/", views.SagaRun.as_view(), name="saga-run"),
    path(SAGA + "preview-report/", views.SagaPreviewReport.as_view(), name="saga-preview-report"),
    path(SAGA + "promote/", views.SagaPromote.as_view(), name="saga-promote"),
    path(NODE + "approve/", views.NodeApprove.as_view(), name="node-approve"),
    path(NODE + "reject/", views.NodeReject.as_view(), name="node-reject"),
    path(NODE + "retry/", views.NodeRetry.as_view(), name="node-retry"),
    path(SAGA + "timeline/", views.SagaTimeline.as_view(), name="saga-timeline"),
    path(SAGA + "audit-events/", views.SagaAuditEvents.as_view(), name="saga-audit-events"),
    path(SAGA + "audit-events/verify/", views.SagaAuditVerification.as_view(), name="saga-audit-verify"),
    path(SAGA + "policy-decisions/", views.SagaPolicyDecisions.as_view(), name="saga-policy-decisions"),
    path("approvals/", views.ApprovalQueue.as_view(), name="approval-list"),
    path("actions/", views.ActionCollection.as_view(), name="action-list"),
    path("actions/<str:action>/", views.ActionDetail.as_view(), name="action-detail"),
    path("policy/", views.PolicyStatus.as_view(), name="policy-status"),
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
