"""SAGA_MAX_ACTION_RESULT_BYTES for HTTP actions: a 2xx answer over the limit fails the attempt as RESULT_TOO_LARGE,
uncertain and not retried (the remote acted; its answer cannot be the step's result), and is read only up to the
limit: a body of 50 MB is abandoned after about the limit, never loaded whole. Failures and compensations keep their
bounded receipts as before."""

from __future__ import annotations

import json
import socket
import threading
from typing import Any

import pytest
from django.test import override_settings

from registry.actions import InvocationContext, invoke_compensation, invoke_forward
from registry.errors import ActionFailure
from tests.httpserver import RecordingHTTPServer
from tests.startup import refused_at_start_up

LIMIT = 1024


def _definition(base_url: str) -> dict[str, Any]:
    return {
        "id": "export",
        "version": "1.0.0",
        "kind": "http",
        "forward": {"url": f"{base_url}/exports", "method": "POST", "body": {"n": "${input.n}"}},
        "compensation": {"url": f"{base_url}/exports/undo", "method": "POST", "body": {}},
    }


def _ctx(**overrides: Any) -> InvocationContext:
    values: dict[str, Any] = {"saga_id": "saga-1", "step_id": "step-1", "idempotency_key": "step-1", "input": {"n": 1}}
    return InvocationContext(**{**values, **overrides})


def _padded(size: int) -> dict[str, str]:
    """A JSON object whose encoding (json.dumps, as the test server sends it) is exactly `size` bytes."""
    return {"p": "x" * (size - len(json.dumps({"p": ""})))}


@override_settings(SAGA_MAX_ACTION_RESULT_BYTES=LIMIT)
def test_a_success_answer_over_the_limit_fails_as_uncertain_and_not_retryable(server: RecordingHTTPServer):
    server.script("/exports", [(200, _padded(LIMIT + 1))])

    with pytest.raises(ActionFailure) as caught:
        invoke_forward(_definition(server.url), _ctx())

    failure = caught.value
    assert (failure.code, failure.uncertain, failure.retryable) == ("RESULT_TOO_LARGE", True, False)
    assert f"more than the {LIMIT} bytes a step keeps" in failure.message
    assert "(SAGA_MAX_ACTION_RESULT_BYTES)" in failure.message and "most likely took effect" in failure.message
    assert failure.receipt is not None and failure.receipt["status_code"] == 200
    assert failure.receipt["truncated"] is True and failure.receipt["limit_bytes"] == LIMIT
    assert len(failure.receipt["body"]) <= 4096


@override_settings(SAGA_MAX_ACTION_RESULT_BYTES=LIMIT)
def test_a_success_answer_at_the_limit_is_the_result(server: RecordingHTTPServer):
    server.script("/exports", [(200, _padded(LIMIT))])

    assert invoke_forward(_definition(server.url), _ctx()) == _padded(LIMIT)


@override_settings(SAGA_MAX_ACTION_RESULT_BYTES=LIMIT)
def test_a_compensation_answer_over_the_limit_still_counts_as_the_undo_done(server: RecordingHTTPServer):
    server.script("/exports/undo", [(200, _padded(LIMIT * 8))])

    undone = invoke_compensation(_definition(server.url), _ctx(idempotency_key="step-1:rollback", result={}))

    assert undone["status_code"] == 200 and undone["truncated"] is True and len(undone["text"]) <= 4096


@override_settings(SAGA_MAX_ACTION_RESULT_BYTES=LIMIT)
def test_an_error_answer_over_the_limit_keeps_its_usual_bounded_receipt(server: RecordingHTTPServer):
    server.script("/exports", [(422, _padded(LIMIT * 8))])

    with pytest.raises(ActionFailure) as caught:
        invoke_forward(_definition(server.url), _ctx())

    assert caught.value.code == "HTTP_STATUS" and caught.value.receipt["truncated"] is True


class EndlessAnswer:
    """One connection: reads the request, answers 200 with a chunked body of up to `total` bytes, and counts how
    many it got to send before the client hung up."""

    def __init__(self, total: int) -> None:
        self.total, self.sent = total, 0
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self._listener.getsockname()[1]}"
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        connection, _ = self._listener.accept()
        with connection, self._listener:
            request = b""
            while b"\r\n\r\n" not in request:
                request += connection.recv(65536)
            head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
            chunk = b"x" * 65536
            try:
                connection.sendall(head)
                while self.sent < self.total:
                    connection.sendall(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                    self.sent += len(chunk)
            except OSError:  # the client closed the connection: what it did not read is never sent
                return


def test_a_50_mb_answer_is_abandoned_after_the_limit_not_read_whole():
    total = 50 * 1024 * 1024
    endless = EndlessAnswer(total)

    with pytest.raises(ActionFailure) as caught:
        invoke_forward(_definition(endless.url), _ctx())

    endless.thread.join(timeout=60)
    assert caught.value.code == "RESULT_TOO_LARGE" and "1048576 bytes" in caught.value.message  # the 1 MiB default
    assert not endless.thread.is_alive() and endless.sent < total // 2, endless.sent


@pytest.mark.parametrize("value", ["1023", "67108865", "big"])
def test_a_result_limit_out_of_range_stops_start_up(value: str):
    refused_at_start_up("SAGA_MAX_ACTION_RESULT_BYTES", value)
