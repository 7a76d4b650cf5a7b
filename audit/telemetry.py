"""OpenTelemetry: W3C trace context carried from the caller to the worker and on to downstream systems, spans for
the coordinator's work, and OTLP/HTTP export only when OTEL_EXPORTER_OTLP_ENDPOINT is set.

Without an endpoint nothing is exported, but context still propagates: an agent's trace id reaches every audit
event (trace_id, span_id columns), the worker that runs the step, and the HTTP request the action sends. Span
attributes carry ids and statuses only: never inputs, results, secrets or checkpoint data.

OpenTelemetry's API is imported by the functions that use it, not with this module: every process imports this
module (AuditConfig.ready), and an operator's `semantic-saga status` that records nothing would otherwise pay for
loading the API and its propagators (some 10 ms of a command meant to answer in 0.2 s).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from opentelemetry import trace

TRACER_NAME = "semantic-saga"
W3C_KEYS = ("traceparent", "tracestate", "baggage")

_configured = threading.Event()
_lock = threading.Lock()


def configure() -> None:
    """Install the SDK's tracer provider with OTLP/HTTP export when an endpoint is configured (once per process)."""
    with _lock:
        if _configured.is_set():
            return
        _configured.set()
        if not os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT") and not os.environ.get(
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
        ):
            return
        from opentelemetry import metrics, trace
        from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor

        service = os.environ.get("OTEL_SERVICE_NAME", "semantic-saga")
        resource = Resource.create({"service.name": service})
        provider = TracerProvider(resource=resource)
        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
        trace.set_tracer_provider(provider)
        reader = PeriodicExportingMetricReader(OTLPMetricExporter())
        metrics.set_meter_provider(MeterProvider(resource=resource, metric_readers=[reader]))
        from opentelemetry.instrumentation.django import DjangoInstrumentor

        DjangoInstrumentor().instrument()


def tracer() -> trace.Tracer:
    from opentelemetry import trace

    return trace.get_tracer(TRACER_NAME)


@contextmanager
def span(name: str, **attributes: Any) -> Iterator[trace.Span]:
    """A span for a unit of coordinator work; attributes must be ids, names, counts or statuses."""
    clean = {k: v for k, v in attributes.items() if isinstance(v, str | int | float | bool)}
    with tracer().start_as_current_span(name, attributes=clean) as current:
        yield current


def current_ids() -> tuple[str, str]:
    """(trace id, span id) of the current span as lower-case hex, or empty strings outside any trace."""
    from opentelemetry import trace

    span_context = trace.get_current_span().get_span_context()
    if not span_context.is_valid:
        return "", ""
    return format(span_context.trace_id, "032x"), format(span_context.span_id, "016x")


def carrier() -> dict[str, str]:
    """The current trace context as W3C headers, to hand to another thread or process."""
    from opentelemetry import propagate

    headers: dict[str, str] = {}
    propagate.inject(headers)
    return headers


@contextmanager
def attached(headers: Mapping[str, Any] | None) -> Iterator[None]:
    """Continue the trace the given W3C headers (traceparent, tracestate, baggage) describe, if any."""
    found = {k: str(v) for k, v in (headers or {}).items() if k.lower() in W3C_KEYS and v}
    if not found:
        yield
        return
    from opentelemetry import context, propagate

    token = context.attach(propagate.extract(found))
    try:
        yield
    finally:
        context.detach(token)


# --- metrics: low-cardinality labels only (operation names, outcomes, phases); never saga, tenant or principal ids

_instruments: dict[str, Any] = {}


def _instrument(kind: str, name: str, description: str, unit: str = "1") -> Any:
    key = f"{kind}:{name}"
    if key not in _instruments:
        from opentelemetry import metrics

        meter = metrics.get_meter(TRACER_NAME)
        factory = meter.create_histogram if kind == "histogram" else meter.create_counter
        _instruments[key] = factory(name, unit=unit, description=description)
    return _instruments[key]


ALLOWED_LABELS = frozenset({"operation", "outcome", "phase", "effect", "kind", "decision"})


def count(name: str, description: str, **labels: str) -> None:
    _instrument("counter", name, description).add(1, _labels(labels))


def observe_seconds(name: str, description: str, seconds: float, **labels: str) -> None:
    _instrument("histogram", name, description, unit="s").record(seconds, _labels(labels))


def _labels(labels: dict[str, str]) -> dict[str, str]:
    unknown = set(labels) - ALLOWED_LABELS
    if unknown:  # a programming error: an id as a label would explode metric cardinality and leak identities
        raise ValueError(f"metric labels {sorted(unknown)} are not allowed; use {sorted(ALLOWED_LABELS)}")
    return labels
