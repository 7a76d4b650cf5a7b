"""HTTP actions: one synchronous request per attempt, classified into success, retryable, permanent or uncertain.

The `Idempotency-Key` header (`<step id>`, or `<step id>:rollback` for compensation) is what makes retries safe:
every attempt of the same call carries the same key, so a remote that deduplicates applies it once.

The URL may hold per-segment templates (registry.url_templates) and the body whole-value ones
(registry.templating); both are rendered before anything is resolved or sent.

Secrets are resolved just before sending and scrubbed from everything that leaves this module (results,
receipts, messages), because a remote may echo request headers back in its answer.
"""

from __future__ import annotations

import json
import threading
from typing import Any

import httpx
from opentelemetry import propagate

from registry.actions import result_limit
from registry.actions.context import InvocationContext
from registry.errors import ActionFailure
from registry.secrets import resolve_header, scrub
from registry.templating import render
from registry.url_templates import render_url

DEFAULT_TIMEOUT_SECONDS = 10.0
# Receipts (what a failing remote said) are kept small: they end up in step errors shown to agents.
RECEIPT_BODY_LIMIT = 4096
# Statuses that mean "not now" rather than "never": the same request may succeed later.
_RETRYABLE_STATUS = frozenset({408, 425, 429})
# A gateway that timed out or failed talking upstream cannot say whether the upstream acted.
_UNCERTAIN_STATUS = frozenset({502, 504})
# Raised before any byte of the request reached the remote: retrying cannot duplicate an effect.
_NOT_SENT = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)
# The request itself is malformed on our side; the same request will fail the same way.
_INVALID_REQUEST = (httpx.LocalProtocolError, httpx.UnsupportedProtocol, httpx.InvalidURL)
USER_AGENT = "semantic-saga"

_client: httpx.Client | None = None
_client_lock = threading.Lock()


def _shared_client() -> httpx.Client:
    """One pooled client per process (thread-safe), so chained steps to one host reuse connections."""
    global _client
    with _client_lock:
        if _client is None:
            _client = httpx.Client(follow_redirects=False, headers={"User-Agent": USER_AGENT})
        return _client


def call(request: dict[str, Any], ctx: InvocationContext, *, compensation: bool) -> Any:
    """Send the contract's request for this invocation; return the parsed answer or raise ActionFailure.

    Every message names the rendered URL (`DELETE .../services/svc_1`), the request target the step's journal
    keeps; it holds no secret, because secret references are only allowed in headers.
    """
    part, scope = ("compensation" if compensation else "forward"), ctx.template_scope()
    # Templates first: a value that cannot be rendered fails before any secret is resolved or byte sent.
    method, url = request["method"], render_url(request["url"], scope, f"{part}.url")
    body = render(request["body"], scope, f"{part}.body") if "body" in request else None
    headers, secrets = _headers(request.get("headers") or {}, ctx)
    content = None
    if "body" in request:
        content = json.dumps(body, ensure_ascii=False, allow_nan=False).encode("utf-8")
        if not any(name.lower() == "content-type" for name in headers):
            headers["Content-Type"] = "application/json"
    timeout = float(request.get("timeout_seconds", DEFAULT_TIMEOUT_SECONDS))
    try:
        status, reason, raw, truncated = _send(method, url, headers, content, timeout)
    except (httpx.HTTPError, httpx.InvalidURL) as exc:
        # `from None`: a chained httpx exception could carry header values into a logged traceback.
        raise _transport_failure(exc, method, url, timeout, secrets) from None
    if 200 <= status < 300:
        if truncated and not compensation:
            raise _too_large(method, url, status, raw, secrets)
        return _success_result(status, raw, truncated, secrets)
    raise _status_failure(method, url, status, reason, _receipt(status, raw, truncated, secrets))


def _headers(spec: dict[str, Any], ctx: InvocationContext) -> tuple[dict[str, str], list[str]]:
    headers: dict[str, str] = {}
    secrets: list[str] = []
    for name, value in spec.items():
        headers[name] = resolve_header(value)
        if not isinstance(value, str):
            # Remember the bare secret (without its prefix) so any echo of it can be scrubbed.
            secrets.append(headers[name].removeprefix(value.get("prefix", "")))
    # W3C trace context of the current span (a no-op without tracing), so the remote joins the saga's trace.
    propagate.inject(headers)
    headers["Idempotency-Key"] = ctx.idempotency_key
    return headers, secrets


def _send(
    method: str, url: str, headers: dict[str, str], content: bytes | None, timeout: float
) -> tuple[int, str, bytes, bool]:
    """Status, reason, body and whether the body is over SAGA_MAX_ACTION_RESULT_BYTES. The body is streamed and
    reading stops at the first chunk past the limit (closing the connection), so a 50 MB answer costs one chunk
    beyond the limit in memory, never 50 MB; an over-limit body is returned as its first limit + 1 bytes."""
    limit = result_limit.limit()
    with _shared_client().stream(method, url, headers=headers, content=content, timeout=timeout) as response:
        raw = bytearray()
        for chunk in response.iter_bytes():
            raw += chunk
            if len(raw) > limit:
                return response.status_code, response.reason_phrase, bytes(raw[: limit + 1]), True
        return response.status_code, response.reason_phrase, bytes(raw), False


def _too_large(method: str, url: str, status: int, raw: bytes, secrets: list[str]) -> ActionFailure:
    text, _ = _text(raw, secrets, RECEIPT_BODY_LIMIT)
    answered = f"{method} {url} answered {status}, but reading its body stopped at {result_limit.limit()} bytes"
    return result_limit.too_large(answered, {"status_code": status, "body": text})


def _success_result(status: int, raw: bytes, truncated: bool, secrets: list[str]) -> Any:
    parsed = _parse_json(raw)
    if parsed is not _NOT_JSON and not truncated:
        return scrub(parsed, secrets)
    text, cut = _text(raw, secrets, RECEIPT_BODY_LIMIT)
    result: dict[str, Any] = {"status_code": status, "text": text}
    if cut or truncated:
        result["truncated"] = True
    return result


def _receipt(status: int, raw: bytes, truncated: bool, secrets: list[str]) -> dict[str, Any]:
    parsed = _parse_json(raw) if len(raw) <= RECEIPT_BODY_LIMIT else _NOT_JSON
    if parsed is not _NOT_JSON and not truncated:
        return {"status_code": status, "body": scrub(parsed, secrets)}
    text, cut = _text(raw, secrets, RECEIPT_BODY_LIMIT)
    receipt: dict[str, Any] = {"status_code": status, "body": text}
    if cut or truncated:
        receipt["truncated"] = True
    return receipt


_NOT_JSON = object()


def _parse_json(raw: bytes) -> Any:
    if not raw.strip():
        return _NOT_JSON
    try:
        return json.loads(raw)
    except ValueError:
        return _NOT_JSON


def _text(raw: bytes, secrets: list[str], limit: int) -> tuple[str, bool]:
    # Redact before cutting: a cut through the middle of a secret would leave a prefix no longer matched.
    text = scrub(raw.decode("utf-8", errors="replace"), secrets)
    return (text[:limit], True) if len(text) > limit else (text, False)


def _status_failure(method: str, url: str, status: int, reason: str, receipt: dict[str, Any]) -> ActionFailure:
    answered = f"{method} {url} answered {status} {reason}".rstrip()
    if status in _RETRYABLE_STATUS or status >= 500:
        uncertain = status in _UNCERTAIN_STATUS
        message = f"{answered}. This is usually temporary; retries reuse the same Idempotency-Key." + (
            " A gateway error does not tell whether the remote acted, so the outcome is uncertain." if uncertain else ""
        )
        return ActionFailure("HTTP_STATUS", message, retryable=True, uncertain=uncertain, receipt=receipt)
    hint = (
        "Redirects are not followed; the contract must point at the final URL."
        if 300 <= status < 400
        else "The remote refused this request and will refuse it again: do not retry it unchanged; check the "
        "input and the contract (the receipt holds the remote's answer)."
    )
    return ActionFailure("HTTP_STATUS", f"{answered}. {hint}", retryable=False, receipt=receipt)


def _transport_failure(
    exc: httpx.HTTPError | httpx.InvalidURL, method: str, url: str, timeout: float, secrets: list[str]
) -> ActionFailure:
    kind = type(exc).__name__
    if isinstance(exc, _INVALID_REQUEST):
        # The exception text may quote header values, so only its type is reported.
        return ActionFailure(
            "HTTP_REQUEST_INVALID",
            f"{method} {url} could not be sent ({kind}): the request is malformed on our side. Nothing was sent; "
            "fix the contract or the secret value, then retry.",
            retryable=False,
        )
    detail = scrub(str(exc), secrets) or kind
    if isinstance(exc, _NOT_SENT):
        return ActionFailure(
            "HTTP_CONNECT_FAILED",
            f"Could not reach {url} ({kind}: {detail}). The request was not sent, so retrying is safe.",
            retryable=True,
        )
    if isinstance(exc, httpx.TimeoutException):
        return ActionFailure(
            "HTTP_TIMEOUT",
            f"{method} {url} was sent but no complete answer came within {timeout:g}s ({kind}). The remote may "
            "or may not have acted: the outcome is uncertain. Retries reuse the same Idempotency-Key; otherwise "
            "compensate or reconcile.",
            retryable=True,
            uncertain=True,
        )
    return ActionFailure(
        "HTTP_TRANSPORT_ERROR",
        f"{method} {url} failed after the request was sent ({kind}: {detail}). The remote may or may not have "
        "acted: the outcome is uncertain. Retries reuse the same Idempotency-Key; otherwise compensate or "
        "reconcile.",
        retryable=True,
        uncertain=True,
    )
