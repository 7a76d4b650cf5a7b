from __future__ import annotations

import json
from typing import Any

import pytest

from registry.actions import InvocationContext, invoke_compensation, invoke_forward
from registry.errors import ActionFailure
from tests.distributed.workers import free_port
from tests.httpserver import RecordingHTTPServer, Reply

SECRET = "tok-7f3a9c-very-secret"


def _definition(base_url: str, **forward: Any) -> dict[str, Any]:
    return {
        "id": "charge",
        "version": "1.0.0",
        "kind": "http",
        "forward": {
            "url": f"{base_url}/charges",
            "method": "POST",
            "headers": {
                "Authorization": {"secret_ref": "env://TEST_PAYMENTS_TOKEN", "prefix": "Bearer "},
                "X-Client": "saga-tests",
            },
            "body": {"amount": "${input.amount}", "currency": "${input.currency}", "reference": "${step.id}"},
            **forward,
        },
        "compensation": {
            "url": f"{base_url}/refunds",
            "method": "POST",
            "body": {"charge_id": "${result.id}", "saga": "${saga.id}"},
        },
    }


def _ctx(**overrides: Any) -> InvocationContext:
    values: dict[str, Any] = {
        "saga_id": "saga-1",
        "step_id": "step-1",
        "idempotency_key": "step-1",
        "input": {"amount": 1250, "currency": "EUR"},
    }
    return InvocationContext(**{**values, **overrides})


def _forward_failure(definition: dict[str, Any], ctx: InvocationContext | None = None) -> ActionFailure:
    with pytest.raises(ActionFailure) as caught:
        invoke_forward(definition, ctx or _ctx())
    return caught.value


@pytest.fixture(autouse=True)
def payments_token(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TEST_PAYMENTS_TOKEN", SECRET)


def test_http_forward_sends_idempotency_key_and_rendered_body(server: RecordingHTTPServer) -> None:
    # given a charge endpoint that answers with a charge id
    server.script("/charges", [(201, {"id": "ch_1"})])
    # when the forward call runs
    result = invoke_forward(_definition(server.url), _ctx())
    # then the parsed answer is the result, and the request carried the key and typed body values
    assert result == {"id": "ch_1"}
    method, path, headers, body = server.requests[0]
    assert (method, path) == ("POST", "/charges")
    assert headers["Idempotency-Key"] == "step-1"
    assert headers["X-Client"] == "saga-tests"
    assert body == {"amount": 1250, "currency": "EUR", "reference": "step-1"}


def test_http_compensation_sends_rollback_key_and_result_fields(server: RecordingHTTPServer) -> None:
    # given a forward result with the charge id
    ctx = _ctx(idempotency_key="step-1:rollback", result={"id": "ch_1"})
    # when the compensation runs
    invoke_compensation(_definition(server.url), ctx)
    # then it carries the rollback key and the forward result's id
    (request,) = server.requests_to("/refunds")
    assert request.headers["Idempotency-Key"] == "step-1:rollback"
    assert request.json == {"charge_id": "ch_1", "saga": "saga-1"}


def test_http_secret_header_sent_but_never_exposed(server: RecordingHTTPServer) -> None:
    # given a server that echoes the first request (headers included) and answers the second with an error
    # page quoting the secret
    definition = _definition(server.url)
    # when both calls run
    echoed = invoke_forward(definition, _ctx())
    server.script("/charges", [(500, {"seen": f"Bearer {SECRET}"})])
    failure = _forward_failure(definition)
    # then the remote received the prefixed secret...
    assert server.requests[0].headers["Authorization"] == f"Bearer {SECRET}"
    # ...but it appears in neither the contract, the result, nor the error
    assert SECRET not in json.dumps(definition)
    assert SECRET not in json.dumps(echoed)
    assert echoed["headers"]["Authorization"] == "Bearer [REDACTED]"
    assert SECRET not in json.dumps(failure.as_dict())
    assert failure.receipt == {"status_code": 500, "body": {"seen": "Bearer [REDACTED]"}}


def test_http_missing_secret_names_variable(server: RecordingHTTPServer, monkeypatch: pytest.MonkeyPatch) -> None:
    # given the token variable is not set
    monkeypatch.delenv("TEST_PAYMENTS_TOKEN")
    # when the call runs
    failure = _forward_failure(_definition(server.url))
    # then it fails permanently, names the variable, says what to do, and sent nothing
    assert (failure.code, failure.retryable, failure.uncertain) == ("SECRET_UNAVAILABLE", False, False)
    assert "TEST_PAYMENTS_TOKEN is not set" in failure.message
    assert "Set TEST_PAYMENTS_TOKEN" in failure.message
    assert server.requests == []


@pytest.mark.parametrize(
    ("status", "retryable", "uncertain"),
    [
        (500, True, False),
        (503, True, False),
        (504, True, True),
        (429, True, False),
        (408, True, False),
        (400, False, False),
        (404, False, False),
        (409, False, False),
    ],
)
def test_http_status_classification(server: RecordingHTTPServer, status: int, retryable: bool, uncertain: bool) -> None:
    # given the remote answers with an error status
    server.script("/charges", [(status, {"error": "nope"})])
    # when the call runs
    failure = _forward_failure(_definition(server.url))
    # then retryability follows the status, and the receipt holds the answer
    assert (failure.code, failure.retryable, failure.uncertain) == ("HTTP_STATUS", retryable, uncertain)
    assert failure.receipt == {"status_code": status, "body": {"error": "nope"}}
    assert f"answered {status}" in failure.message


def test_http_receipt_body_truncated(server: RecordingHTTPServer) -> None:
    # given a large non-JSON error page
    server.script("/charges", [(502, "x" * 10_000)])
    # when the call fails
    failure = _forward_failure(_definition(server.url))
    # then the receipt keeps only the first 4 KB
    assert failure.receipt is not None
    assert len(failure.receipt["body"]) == 4096
    assert failure.receipt["truncated"] is True


def test_http_timeout_after_sending_is_uncertain(server: RecordingHTTPServer) -> None:
    # given a remote that answers only after the contract's timeout
    server.script("/charges", [Reply(200, {"id": "late"}, delay=1.0)])
    # when the call runs
    failure = _forward_failure(_definition(server.url, timeout_seconds=0.2))
    # then it may have happened: retryable and uncertain
    assert (failure.code, failure.retryable, failure.uncertain) == ("HTTP_TIMEOUT", True, True)
    assert len(server.requests) == 1


def test_http_disconnect_without_answer_is_uncertain(server: RecordingHTTPServer) -> None:
    # given a remote that closes the connection after receiving the request
    server.script("/charges", [Reply(disconnect=True)])
    # when the call runs
    failure = _forward_failure(_definition(server.url))
    # then
    assert (failure.code, failure.retryable, failure.uncertain) == ("HTTP_TRANSPORT_ERROR", True, True)


def test_http_connection_refused_is_retryable_not_uncertain() -> None:
    # given a port nobody listens on
    port = free_port()
    # when the call runs
    failure = _forward_failure(_definition(f"http://127.0.0.1:{port}"))
    # then the request was never sent: retrying is safe
    assert (failure.code, failure.retryable, failure.uncertain) == ("HTTP_CONNECT_FAILED", True, False)


def test_http_missing_template_path_is_permanent(server: RecordingHTTPServer) -> None:
    # given an input without the currency the body needs
    # when the call runs
    failure = _forward_failure(_definition(server.url), _ctx(input={"amount": 5}))
    # then it fails before sending, naming the template and what is missing
    assert (failure.code, failure.retryable) == ("TEMPLATE_PATH_MISSING", False)
    assert "forward.body.currency: template ${input.currency} cannot be rendered: input has no 'currency'" in (
        failure.message
    )
    assert server.requests == []


def test_http_compensation_without_result_field_is_permanent(server: RecordingHTTPServer) -> None:
    # given a forward result that is null (e.g. the forward call's outcome was uncertain)
    ctx = _ctx(idempotency_key="step-1:rollback", result=None)
    # when the compensation runs
    with pytest.raises(ActionFailure) as caught:
        invoke_compensation(_definition(server.url), ctx)
    # then
    assert caught.value.code == "TEMPLATE_PATH_MISSING"
    assert "result has no 'id' (it is null)" in caught.value.message


def test_http_templates_keep_json_types(server: RecordingHTTPServer) -> None:
    # given a body that references a nested object, a list element and a boolean
    definition = _definition(
        server.url, body={"order": "${input.order}", "first": "${input.order.lines.0}", "flag": "${input.flag}"}
    )
    ctx = _ctx(input={"order": {"lines": [{"sku": "A", "qty": 2}]}, "flag": False})
    # when the call runs
    invoke_forward(definition, ctx)
    # then values arrive with their JSON types
    assert server.requests[0].json == {
        "order": {"lines": [{"sku": "A", "qty": 2}]},
        "first": {"sku": "A", "qty": 2},
        "flag": False,
    }


def test_http_non_json_success_is_wrapped(server: RecordingHTTPServer) -> None:
    # given a remote answering plain text
    server.script("/charges", [(200, "OK")])
    # when the call runs
    result = invoke_forward(_definition(server.url), _ctx())
    # then
    assert result == {"status_code": 200, "text": "OK"}
