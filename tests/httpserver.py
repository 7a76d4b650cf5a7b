"""A real local HTTP server for tests: records every request and answers from per-path scripts.

Usage (typically from a module-scoped fixture)::

    with RecordingHTTPServer() as server:
        server.script("/charges", [(500, {"error": "boom"}), (200, {"id": "ch_1"})])
        ...  # call f"{server.url}/charges"
        method, path, headers, body = server.requests[0]

Each path has a queue of scripted replies, consumed one per request in order; when a path's queue is empty the
server answers 200 with an echo of the request: `{"method", "path", "headers", "json"}`. A reply is a `Reply`
or a tuple `(status, body)` / `(status, body, delay_seconds)`; a dict or list body is sent as JSON, a str as
text/plain, bytes as-is. `Reply(delay=...)` sleeps before answering (client timeouts) and
`Reply(disconnect=True)` closes the connection without answering (a request that was sent but never answered).
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections import deque
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, NamedTuple


class RecordedRequest(NamedTuple):
    method: str
    path: str  # including the query string
    headers: dict[str, str]  # names as sent; use .get with the exact case, or lower() both sides
    json: Any  # the parsed JSON body; the raw text when not JSON; None when empty


@dataclass(frozen=True)
class Reply:
    status: int = 200
    body: Any = None
    headers: dict[str, str] | None = None
    delay: float = 0.0
    disconnect: bool = False


ReplySpec = Reply | tuple[Any, ...]


class RecordingHTTPServer:
    def __init__(self, host: str = "127.0.0.1") -> None:
        self._host = host
        self._lock = threading.Lock()
        self._scripts: dict[str, deque[Reply]] = {}
        self._barriers: dict[str, threading.Barrier] = {}
        self._in_flight: dict[str, int] = {}
        self._max_in_flight: dict[str, int] = {}
        self.requests: list[RecordedRequest] = []
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # --- lifecycle ----------------------------------------------------------------------------------------------

    def start(self) -> RecordingHTTPServer:
        self._server = ThreadingHTTPServer((self._host, 0), _handler_for(self))
        # Daemon threads: a handler still sleeping in a timeout test never blocks shutdown or interpreter exit.
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="recording-http", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> RecordingHTTPServer:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    @property
    def url(self) -> str:
        """Base URL without a trailing slash, e.g. http://127.0.0.1:54321."""
        assert self._server is not None, "start() the server first"
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    # --- scripting and inspection ---------------------------------------------------------------------------------

    def script(self, path: str, replies: list[ReplySpec]) -> None:
        """Queue replies for `path` (without query string), appended after any still queued."""
        with self._lock:
            self._scripts.setdefault(path, deque()).extend(_as_reply(spec) for spec in replies)

    def requests_to(self, path: str) -> list[RecordedRequest]:
        with self._lock:
            return [request for request in self.requests if request.path.split("?")[0] == path]

    def barrier(self, path: str, parties: int, timeout: float) -> None:
        """Hold requests to `path` until `parties` of them are in flight at once, then answer all 200.

        A request that waits `timeout` seconds without its peers gets 503: proof of concurrency without timing.
        """
        with self._lock:
            self._barriers[path] = threading.Barrier(parties, timeout=timeout)

    def max_in_flight(self, path: str) -> int:
        """The most requests to `path` this server was handling at the same moment."""
        with self._lock:
            return self._max_in_flight.get(path, 0)

    def reset(self) -> None:
        """Forget recorded requests, queued replies and barriers (between tests sharing one server)."""
        with self._lock:
            self._scripts.clear()
            self._barriers.clear()
            self._max_in_flight.clear()
            self.requests.clear()

    def _enter(self, path: str) -> threading.Barrier | None:
        with self._lock:
            self._in_flight[path] = self._in_flight.get(path, 0) + 1
            self._max_in_flight[path] = max(self._max_in_flight.get(path, 0), self._in_flight[path])
            return self._barriers.get(path)

    def _leave(self, path: str) -> None:
        with self._lock:
            self._in_flight[path] -= 1

    # --- used by the handler --------------------------------------------------------------------------------------

    def _record_and_pick(self, request: RecordedRequest) -> Reply | None:
        with self._lock:
            self.requests.append(request)
            queue = self._scripts.get(request.path.split("?")[0])
            return queue.popleft() if queue else None


def _as_reply(spec: ReplySpec) -> Reply:
    if isinstance(spec, Reply):
        return spec
    status, body, *rest = spec
    return Reply(status=status, body=body, delay=float(rest[0]) if rest else 0.0)


def _encode(body: Any) -> tuple[bytes, str]:
    if isinstance(body, bytes):
        return body, "application/octet-stream"
    if isinstance(body, str):
        return body.encode("utf-8"), "text/plain; charset=utf-8"
    if body is None:
        return b"", "text/plain"
    return json.dumps(body).encode("utf-8"), "application/json"


def _handler_for(server: RecordingHTTPServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:
            self._handle()

        do_POST = do_PUT = do_PATCH = do_DELETE = do_GET

        def log_message(self, format: str, *args: Any) -> None:
            pass  # keep test output clean

        def _handle(self) -> None:
            request = RecordedRequest(self.command, self.path, dict(self.headers.items()), self._read_body())
            path = self.path.split("?")[0]
            barrier = server._enter(path)
            try:
                reply = server._record_and_pick(request)
                if reply is None:
                    reply = Reply(200, request._asdict())
                if barrier is not None:
                    reply = self._meet(barrier, reply)
                self._answer(reply)
            finally:
                server._leave(path)

        def _meet(self, barrier: threading.Barrier, reply: Reply) -> Reply:
            try:
                barrier.wait()
            except threading.BrokenBarrierError:
                return Reply(503, {"error": "barrier broken: the expected concurrent requests never arrived"})
            return reply

        def _answer(self, reply: Reply) -> None:
            if reply.delay:
                time.sleep(reply.delay)
            if reply.disconnect:
                self.close_connection = True
                return
            # The client may have given up first (a timeout test); then there is nobody left to answer.
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                self._send(reply)

        def _read_body(self) -> Any:
            length = int(self.headers.get("Content-Length") or 0)
            text = self.rfile.read(length).decode("utf-8") if length else ""
            if not text:
                return None
            try:
                return json.loads(text)
            except ValueError:
                return text

        def _send(self, reply: Reply) -> None:
            payload, content_type = _encode(reply.body)
            self.send_response(reply.status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(payload)))
            for name, value in (reply.headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(payload)

    return Handler
