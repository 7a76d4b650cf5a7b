"""Spans for the coordinator's work carry ids and statuses, never inputs, results, secrets or checkpoint data."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from governance.identity.principal import Principal
from sagas import coordinator
from tests.contracts import http_contract, register
from tests.httpserver import RecordingHTTPServer

MARKERS = ("PLANTED-INPUT-4242", "PLANTED-RESULT-9911", "PLANTED-SECRET-5e5e", "PLANTED-CHECKPOINT-77")


@pytest.fixture(scope="module")
def exported() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):  # the first SDK provider of this process wins; reuse it
        provider = TracerProvider()
        trace.set_tracer_provider(provider)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield exporter


def test_spans_cover_attempts_policy_and_compensation_without_payloads(
    exported: InMemorySpanExporter,
    transactional_db: None,
    operator: Principal,
    downstream: RecordingHTTPServer,
    monkeypatch: pytest.MonkeyPatch,
    settings: Any,
    tmp_path: Any,
):
    # given a policy, a secret header, and a step whose input, result and checkpoint carry marker strings
    policy = tmp_path / "policy.json"
    policy.write_text(
        json.dumps({"schema_version": 1, "revision": "r", "default_effect": "allow", "tenants": {"*": {}}})
    )
    settings.SAGA_POLICY_MODE, settings.SAGA_POLICY_FILE = "json", str(policy)
    monkeypatch.setenv("SPAN_TEST_TOKEN", MARKERS[2])
    headers = {"Authorization": {"secret_ref": "env://SPAN_TEST_TOKEN", "prefix": "Bearer "}}
    register(http_contract("charge", downstream.url, headers=headers))
    downstream.script("/charge", [(200, {"id": MARKERS[1]})])
    exported.clear()
    saga = coordinator.saga_begin(actor=operator)
    coordinator.node_plan(actor=operator, saga_id=saga.id, action="charge", input={"card": MARKERS[0]})
    coordinator.saga_checkpoint(actor=operator, saga_id=saga.id, name="cp", data={"note": MARKERS[3]})
    coordinator.saga_run_ready(actor=operator, saga_id=saga.id)
    coordinator.saga_rollback(actor=operator, saga_id=saga.id)
    # then the work shows up as spans...
    spans = exported.get_finished_spans()
    names = {s.name for s in spans}
    assert {"saga.node_execute", "saga.node_attempt", "saga.policy", "saga.compensation"} <= names
    attempt = next(s for s in spans if s.name == "saga.node_attempt")
    assert attempt.attributes and attempt.attributes["action"] == "charge"
    # ...and no span carries a payload value
    dumped = json.dumps([dict(s.attributes or {}) for s in spans] + [s.name for s in spans], default=str)
    for marker in MARKERS:
        assert marker not in dumped


def test_metrics_use_low_cardinality_labels_only(
    transactional_db: None, operator: Principal, downstream: RecordingHTTPServer
):
    from opentelemetry import metrics
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader

    from audit import telemetry

    reader = InMemoryMetricReader()
    provider = metrics.get_meter_provider()
    if not isinstance(provider, MeterProvider):
        metrics.set_meter_provider(MeterProvider(metric_readers=[reader]))
    else:  # another module installed one first: read what it gathered instead
        pytest.skip("a meter provider without this reader is already installed in this process")
    telemetry._instruments.clear()  # instruments bound to the no-op provider must be recreated
    register(http_contract("charge", downstream.url))
    saga = coordinator.saga_begin(actor=operator)
    coordinator.saga_step_execute(actor=operator, saga_id=saga.id, action="charge", input={"card": MARKERS[0]})
    coordinator.saga_rollback(actor=operator, saga_id=saga.id)
    data = reader.get_metrics_data()
    points = [
        (metric.name, dict(point.attributes or {}))
        for resource in data.resource_metrics
        for scope in resource.scope_metrics
        for metric in scope.metrics
        for point in metric.data.data_points
    ]
    names = {name for name, _ in points}
    assert {"saga.attempts", "saga.attempt.duration", "saga.compensations"} <= names
    for _, labels in points:
        assert set(labels) <= telemetry.ALLOWED_LABELS
        assert str(saga.id) not in str(labels) and "acme" not in str(labels) and "alice" not in str(labels)
    with pytest.raises(ValueError, match="not allowed"):
        telemetry.count("saga.attempts", "x", saga_id=str(saga.id))
