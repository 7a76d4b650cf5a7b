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
import re
from typing import Any
from urllib.parse import unquote, urlsplit

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
    """A pool psycopg would refuse fails only at the first query, long after start-up (saga_project.database). The
    operator verbs connect without the pool, and are still refused one configured wrong (saga_project.operator_settings
    keeps it as SAGA_CONFIGURED_DATABASE)."""
    problem = pool_problem(getattr(settings, "SAGA_CONFIGURED_DATABASE", settings.DATABASES["default"]))
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
    if pipeline_supported():
        return []
    return [
        Error(
            "SAGA_PG_PIPELINE is on, but this psycopg's libpq has no pipeline mode (libpq 14 or later is needed).",
            hint="Install psycopg[binary] (it bundles a recent libpq), or set SAGA_PG_PIPELINE=false.",
            id="saga.E043",
        )
    ]


def pipeline_supported() -> bool:
    """psycopg 3 with a libpq that has pipeline mode (14 or later): the question the coordinator's writes ask
    (sagas.coordinator.sql.pipeline.pipeline_supported), asked here again because importing that module runs the
    coordinator package's __init__, the whole coordinator: some 70 ms of every operator verb's start on PostgreSQL,
    for one attribute of psycopg (loaded where PostgreSQL is configured)."""
    try:
        import psycopg
    except ImportError:
        return False
    return bool(psycopg.Pipeline.is_supported())


# OTEL_EXPORTER_OTLP_HEADERS and its per-signal forms: `key=value` pairs separated by commas (semantic-saga-mcp's
# --otel-headers sets the first). OpenTelemetry skips a malformed pair with a log line per exporter, then exports
# without the header (often the collector's credential), so a bad value is refused here instead.
OTEL_HEADER_VARIABLES = (
    "OTEL_EXPORTER_OTLP_HEADERS",
    "OTEL_EXPORTER_OTLP_TRACES_HEADERS",
    "OTEL_EXPORTER_OTLP_METRICS_HEADERS",
)
_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")  # an HTTP token (RFC 9110), as a header name must be


def otel_headers_problem(value: str) -> str | None:
    """What keeps `value` from being `key=value[,key2=value2...]` (None when it is; values may be URL-encoded)."""
    for pair in value.split(","):
        if not pair.strip():
            continue
        name, equals, _ = pair.partition("=")
        if not equals:
            return f"has {pair.strip()!r}, which is not key=value"
        if not _HEADER_NAME.fullmatch(unquote(name).strip()):
            return f"has {pair.strip()!r}, whose key {name.strip()!r} is not an HTTP header name"
    return None


@register(TAG)
def otel_headers_check(**kwargs: Any) -> list[CheckMessage]:
    errors: list[CheckMessage] = []
    for name in OTEL_HEADER_VARIABLES:
        value = os.environ.get(name, "")
        if value and (problem := otel_headers_problem(value)):
            errors.append(
                Error(
                    f"{name} {problem}.",
                    hint="Write the exporter headers as key=value pairs separated by commas, e.g. "
                    "x-api-key=secret,x-team=ops (URL-encode a comma or = inside a value), or unset it.",
                    id="saga.E046",
                )
            )
    return errors


_ORIGIN = re.compile(
    r"(?P<scheme>[a-z][a-z0-9+.-]*)://(?P<host>\[[0-9a-f:.]+\]|[^\s/:?#@\[\]]+)(?::(?P<port>\d{1,5}|\*))?"
)


def origin_problem(origin: str) -> str | None:
    """What keeps `origin` from being a browser Origin as the MCP transport matches it: scheme://host, with
    :port or :* (any port) optionally. None when it is one."""
    match = _ORIGIN.fullmatch(origin.lower())
    if match is None:
        if origin.rstrip("/") != origin and _ORIGIN.fullmatch(origin.rstrip("/").lower()):
            return f"{origin!r} ends in /, which a browser's Origin header never does"
        return f"{origin!r} is not scheme://host[:port] (e.g. https://app.example.com or http://localhost:*)"
    port = match["port"]
    if port and port != "*" and not 0 < int(port) < 65536:
        return f"{origin!r} has port {port}, not a number from 1 to 65535"
    return None


@register(TAG)
def allowed_origins_check(**kwargs: Any) -> list[CheckMessage]:
    """SAGA_ALLOWED_ORIGINS (semantic-saga-mcp's --allowed-origin): an entry that is no origin matches no browser,
    silently, so every browser client would be refused."""
    problems = [p for origin in settings.SAGA_ALLOWED_ORIGINS if (p := origin_problem(origin))]
    if not problems:
        return []
    return [
        Error(
            f"SAGA_ALLOWED_ORIGINS: {'; '.join(problems)}.",
            hint="List browser origins as scheme://host[:port], comma-separated, e.g. https://app.example.com,"
            "http://localhost:* (a port of * allows any port; docs/configuration.md).",
            id="saga.E047",
        )
    ]


_HOST_NAME = re.compile(
    r"(?:\*\.|\.)?(?:[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?\.)*[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?\.?"
)
_BRACKETED_IP6 = re.compile(r"\[[0-9a-f:.]+\]")


def allowed_host_problem(host: str) -> str | None:
    """What keeps `host` from being an ALLOWED_HOSTS pattern Django and the ASGI front can match: `*`, a host name or
    address, `.example.com` or `*.example.com` (subdomains). None when it is one."""
    lowered = host.lower()
    if lowered == "*" or _HOST_NAME.fullmatch(lowered) or _BRACKETED_IP6.fullmatch(lowered):
        return None
    if "://" in host:
        return f"{host!r} is a URL; list the host name alone ({urlsplit(host).hostname or 'e.g. saga.example.com'})"
    if ":" in host and not host.startswith("["):
        return f"{host!r} has a port; list the host name alone (any port is accepted)"
    return f"{host!r} is not a host name, an IP address, .domain, *.domain or *"


@register(TAG)
def allowed_hosts_check(**kwargs: Any) -> list[CheckMessage]:
    """ALLOWED_HOSTS (semantic-saga-mcp's --allowed-host): Django answers 400 to a Host matching no entry, so an
    entry that is no host name would lock out the clients it was meant for, silently."""
    problems = [p for host in settings.ALLOWED_HOSTS if (p := allowed_host_problem(host))]
    if not problems:
        return []
    return [
        Error(
            f"ALLOWED_HOSTS: {'; '.join(problems)}.",
            hint="List the host names clients reach this server by, comma-separated, e.g. saga.example.com,"
            "127.0.0.1 (.example.com for a domain and its subdomains; docs/configuration.md).",
            id="saga.E048",
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


@register(TAG)
def opa_timeout_check(**kwargs: Any) -> list[CheckMessage]:
    """A timeout httpx cannot use would turn every decision into a fail-closed deny, long after start-up."""
    timeout = settings.SAGA_OPA_TIMEOUT_SECONDS
    if settings.SAGA_POLICY_MODE != "opa" or (timeout > 0 and timeout != float("inf")):
        return []
    return [
        Error(
            f"SAGA_OPA_TIMEOUT_SECONDS (--policy-opa-timeout) is {timeout:g}; the OPA timeout must be a positive "
            "finite number of seconds.",
            hint="Set --policy-opa-timeout or SAGA_OPA_TIMEOUT_SECONDS to e.g. 2 (the default; "
            "docs/policy_governance.md).",
            id="saga.E024",
        )
    ]
