"""A tiny payments + inventory service for trying Semantic Saga locally (the example registry's charge_card and
update_inventory actions call it). Standard library only; state lives in memory; loopback only.

    python examples/demo_service.py            # listens on 127.0.0.1:9999
    PAYMENTS_TOKEN=s3cret python examples/demo_service.py   # then requests must carry "Bearer s3cret"

Routes: POST /charges and POST /charges/<id>/refund; POST /inventory/adjust and DELETE /inventory/reservations/<id>;
GET anything for the current stock and charges. The compensations address what the forward call created by its id
in the path, which the example registry writes as URL templates (`/charges/${result.id}/refund`).

Every write honours the Idempotency-Key header: a repeated key returns the first answer without acting twice,
which is what makes Semantic Saga's retries (same step id) and compensations (`<step id>:rollback`) safe.
"""

from __future__ import annotations

import json
import os
import re
import sys
import threading
import uuid
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import unquote

STOCK: dict[str, int] = {"A-1": 10, "B-2": 3}
CHARGES: dict[str, dict[str, Any]] = {}
RESERVATIONS: dict[str, dict[str, Any]] = {}
ANSWERS: dict[str, tuple[int, dict[str, Any]]] = {}  # idempotency key -> the first answer
LOCK = threading.Lock()


def charge(body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    charge_id = f"ch_{uuid.uuid4().hex[:12]}"
    CHARGES[charge_id] = {"amount": body.get("amount"), "currency": body.get("currency"), "refunded": False}
    return 201, {"id": charge_id, "status": "captured"}


def refund(charge_id: str) -> tuple[int, dict[str, Any]]:
    found = CHARGES.get(charge_id)
    if found is None:
        return 404, {"error": f"no charge {charge_id}"}
    found["refunded"] = True
    return 200, {"id": charge_id, "status": "refunded"}


def reserve(body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    sku, delta = str(body.get("sku")), int(body.get("delta", 0))
    if sku not in STOCK or STOCK[sku] + delta < 0:
        return 409, {"error": f"not enough stock of {sku}"}
    STOCK[sku] += delta
    reservation_id = f"rs_{uuid.uuid4().hex[:12]}"
    RESERVATIONS[reservation_id] = {"sku": sku, "delta": delta}
    return 201, {"reservation_id": reservation_id, "sku": sku, "on_hand": STOCK[sku]}


def release(reservation_id: str) -> tuple[int, dict[str, Any]]:
    reservation = RESERVATIONS.pop(reservation_id, None)
    if reservation is None:
        return 200, {"released": False}  # nothing to undo (already undone, or never done)
    STOCK[reservation["sku"]] -= reservation["delta"]
    return 200, {"released": True, "on_hand": STOCK[reservation["sku"]]}


# Writes that take a JSON body, by path.
BODY_ROUTES = {("POST", "/charges"): charge, ("POST", "/inventory/adjust"): reserve}
# Writes addressed by an id in the path (the example registry's compensations use URL templates such as
# /charges/${result.id}/refund), by method and a pattern whose one group is the id.
ID_ROUTES = [
    ("POST", re.compile(r"/charges/(?P<id>[^/]+)/refund"), refund),
    ("DELETE", re.compile(r"/inventory/reservations/(?P<id>[^/]+)"), release),
]


class Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self._answer(200, {"stock": STOCK, "charges": CHARGES})

    def do_POST(self) -> None:
        self._write()

    def do_DELETE(self) -> None:
        self._write()

    def _write(self) -> None:
        token = os.environ.get("PAYMENTS_TOKEN")
        if token and self.headers.get("Authorization") != f"Bearer {token}":
            self._answer(401, {"error": "bad or missing bearer token"})
            return
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length) or b"{}")
        route = self._route(body)
        if route is None:
            self._answer(404, {"error": f"no route {self.command} {self.path}"})
            return
        key = self.headers.get("Idempotency-Key")
        with LOCK:
            if key and key in ANSWERS:
                status, answer = ANSWERS[key]
            else:
                status, answer = route()
                if key:
                    ANSWERS[key] = (status, answer)
        self._answer(status, answer)

    def _route(self, body: dict[str, Any]) -> Callable[[], tuple[int, dict[str, Any]]] | None:
        with_body = BODY_ROUTES.get((self.command, self.path))
        if with_body is not None:
            return lambda: with_body(body)
        for method, pattern, by_id in ID_ROUTES:
            match = pattern.fullmatch(self.path)
            if method == self.command and match:
                return lambda: by_id(unquote(match["id"]))
        return None

    def _answer(self, status: int, body: dict[str, Any]) -> None:
        payload = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, format: str, *args: Any) -> None:
        sys.stderr.write(f"demo-service {self.command} {self.path} {args[1] if len(args) > 1 else ''}\n")


def main() -> None:
    port = int(sys.argv[1]) if len(sys.argv) > 1 else int(os.environ.get("DEMO_SERVICE_PORT", "9999"))
    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    print(f"demo service on http://127.0.0.1:{port}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
