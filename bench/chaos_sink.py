"""The chaos suite's downstream: a loopback HTTP sink that applies every request's effect before it answers.

Every request is recorded with its Idempotency-Key (the step id, or `<step id>:rollback` for a compensation),
what it asked for (a digest of its body) and whether an answer was written. The effect is applied first, then
the answer may be delayed past the caller's timeout or dropped (connection closed): the write-succeeded-but-
timed-out case. Like a real idempotent API the sink applies a key's effect once; a repeat of a key with a
different body would be a second, different effect, which the invariants count as a violation.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import sys
import threading
import time
from collections import deque
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

DELAY_SECONDS = 3.5  # longer than the chaos actions' timeout_seconds (2): the caller gives up, the effect stays
SLOW_SECONDS = 1.0  # "slow": within the timeout, so a worker is surely mid-call when the injector freezes it


@dataclass
class Delivery:
    path: str
    key: str
    digest: str
    at: float
    answered: bool = False
    status: int = 0
    fault: str = ""


class _QuietServer(ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client killed mid-request (a worker SIGKILLed while sending) is what the suite does on purpose: not a
        traceback on stderr. Anything else is still printed."""
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)


class Sink:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.deliveries: list[Delivery] = []
        self.effects: dict[str, str] = {}  # key -> body digest of the first request that applied it
        self.bodies: dict[str, list[bytes]] = {}  # key -> every distinct body (two = two different effects)
        self._faults: deque[str] = deque()
        self.slow_keys: list[str] = []  # keys of the requests held by a "slow" fault, in order
        self.server = _QuietServer(("127.0.0.1", 0), _handler(self))
        self.server.daemon_threads = True
        self._thread = threading.Thread(target=self.server.serve_forever, name="chaos-sink", daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def start(self) -> Sink:
        self._thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def arm(self, fault: str, count: int = 1) -> None:
        """The next `count` requests apply their effect, then get `fault` ("delay" or "drop") instead of an answer,
        or ("slow") their answer late but within the caller's timeout."""
        with self._lock:
            self._faults.extend([fault] * count)

    def disarm(self) -> None:
        with self._lock:
            self._faults.clear()

    def snapshot(self) -> list[Delivery]:
        with self._lock:
            return list(self.deliveries)

    def incomplete(self, path: str, key: str) -> None:
        with self._lock:
            self.deliveries.append(Delivery(path=path, key=key, digest="", at=time.time(), fault="incomplete"))

    def apply(self, path: str, key: str, body: bytes) -> tuple[Delivery, str]:
        digest = hashlib.sha256(_canonical(body)).hexdigest()[:16]
        with self._lock:
            if self.effects.setdefault(key, digest) != digest or key not in self.bodies:
                self.bodies.setdefault(key, []).append(body[:2000])
            fault = self._faults.popleft() if self._faults and path != "/fail" else ""
            delivery = Delivery(path=path, key=key, digest=digest, at=time.time(), fault=fault)
            self.deliveries.append(delivery)
            if fault == "slow":
                self.slow_keys.append(key)
        return delivery, fault


def _canonical(body: bytes) -> bytes:
    try:
        return json.dumps(json.loads(body or b"null"), sort_keys=True).encode()
    except ValueError:
        return body


def _handler(sink: Sink) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            path = self.path.split("?")[0]
            if len(body) < length:
                # The caller died mid-request (SIGKILL while sending): a real server applies nothing from it.
                sink.incomplete(path, self.headers.get("Idempotency-Key", ""))
                self.close_connection = True
                return
            delivery, fault = sink.apply(path, self.headers.get("Idempotency-Key", ""), body)
            if fault == "drop":
                self.close_connection = True  # the effect is applied; the caller never hears of it
                return
            if fault in ("delay", "slow"):
                time.sleep(DELAY_SECONDS if fault == "delay" else SLOW_SECONDS)
            status, payload = _reply(path, delivery.key)
            with contextlib.suppress(OSError):  # the caller gave up (its timeout) or died
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)
                self.wfile.flush()
                # A delayed answer reaches nobody: the caller's timeout fired first, so it never counts as arrived.
                delivery.answered = fault != "delay"
                delivery.status = status

        def log_message(self, format: str, *args: Any) -> None:
            return

    return Handler


def _reply(path: str, key: str) -> tuple[int, bytes]:
    if path == "/fail":
        # A permanent refusal (4xx): the saga's failure_mode (rollback) compensates what ran before it.
        return 400, json.dumps({"error": "declined by the chaos sink", "key": key}).encode()
    return 200, json.dumps({"ok": True, "key": key}).encode()
