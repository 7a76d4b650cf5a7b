"""Start-up checks: misconfiguration stops a process before it accepts work, with one message naming the setting,
the problem and the fix.

The checks themselves are Django system checks, each app registering its own (governance.checks: tokens, JWT,
policy; registry.checks: SAGA_ACTIONS_FILE; this module: SAGA_PUBLIC_URL, the OpenTelemetry endpoint, the
PostgreSQL pool), so `semantic-saga check` (and `check --deploy`) reports the same problems without serving.
`serve`, `mcp`, the seed command lines and the Celery worker call `configuration_report` before they accept work;
values settings.py already refuses at import stop earlier, in saga_project.cli.
"""

from __future__ import annotations

import os
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.core.checks import CheckMessage, Error, register, run_checks

from governance.checks import TAG, http_url_problem
from saga_project.database import pool_problem

# The OTLP/HTTP exporters read these (audit.telemetry, docs/observability.md); any one set must be a URL.
OTEL_ENDPOINT_VARIABLES = (
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
)


@register(TAG)
def public_url_check(**kwargs: Any) -> list[CheckMessage]:
    """SAGA_PUBLIC_URL is what the agent card, the MCP origin check and OAuth metadata advertise."""
    value = settings.SAGA_PUBLIC_URL
    problem = http_url_problem(value)
    if problem is None and (urlsplit(value).query or urlsplit(value).fragment):
        problem = f"is {value!r}, which has a query or fragment; paths such as /a2a are appended to it"
    if problem is None:
        return []
    return [
        Error(
            f"SAGA_PUBLIC_URL {problem}.",
            hint="Set it to the base URL clients reach this server at, e.g. https://saga.example.com "
            "(default http://127.0.0.1:8000).",
            id="saga.E040",
        )
    ]


@register(TAG)
def otel_endpoint_check(**kwargs: Any) -> list[CheckMessage]:
    """A malformed collector URL would only show up as failed exports in the log, long after start-up."""
    errors: list[CheckMessage] = []
    for name in OTEL_ENDPOINT_VARIABLES:
        value = os.environ.get(name, "")
        if value and (problem := http_url_problem(value)):
            errors.append(
                Error(
                    f"{name} {problem}.",
                    hint="Set it to the collector's OTLP/HTTP URL, e.g. http://otel-collector:4318, or unset it to "
                    "export nothing (docs/observability.md).",
                    id="saga.E041",
                )
            )
    return errors


@register(TAG)
def database_pool_check(**kwargs: Any) -> list[CheckMessage]:
    """A pool psycopg would refuse fails only at the first query, long after start-up (saga_project.database)."""
    problem = pool_problem(settings.DATABASES["default"])
    if problem is None:
        return []
    return [
        Error(
            f"The PostgreSQL connection pool is misconfigured: {problem}.",
            hint="Fix the variable named (docs/configuration.md, 'Database connections'), or set SAGA_DB_POOL=off.",
            id="saga.E042",
        )
    ]


@register(TAG)
def pipeline_check(**kwargs: Any) -> list[CheckMessage]:
    """SAGA_PG_PIPELINE needs a libpq with pipeline mode; without one, writes would silently go one by one."""
    if not settings.SAGA_PG_PIPELINE or "postgresql" not in settings.DATABASES["default"]["ENGINE"]:
        return []
    from sagas.coordinator.sql.pipeline import pipeline_supported  # psycopg: loaded where PostgreSQL is configured

    if pipeline_supported():
        return []
    return [
        Error(
            "SAGA_PG_PIPELINE is on, but this psycopg's libpq has no pipeline mode (libpq 14 or later is needed).",
            hint="Install psycopg[binary] (it bundles a recent libpq), or set SAGA_PG_PIPELINE=false.",
            id="saga.E043",
        )
    ]


def configuration_report(program: str) -> str | None:
    """Run every system check; None when nothing serious was found, else one message for stderr: what `program`
    refuses, then each problem with its fix and check id."""
    problems = [m for m in run_checks() if m.is_serious() and not m.is_silenced()]
    if not problems:
        return None
    lines = [_describe(m) for m in problems]
    if len(lines) == 1:
        return f"{program} did not start: {lines[0]}"
    return f"{program} did not start, {len(lines)} configuration problems:\n" + "\n".join(f"- {x}" for x in lines)


def _describe(message: CheckMessage) -> str:
    # A multi-line message (compiler output) gets its fix on a line of its own.
    gap = "\n" if "\n" in message.msg else " "
    hint = f"{gap}Fix: {message.hint}" if message.hint else ""
    return f"{message.msg}{hint} ({message.id})"
