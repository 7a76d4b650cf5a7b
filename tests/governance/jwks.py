"""Signing keys and a JWKS endpoint for identity tests: real RS256/ES256 keys, served over real local HTTP."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import jwt
from cryptography.hazmat.primitives.asymmetric import ec, rsa

ISSUER = "https://id.example.test/realms/acme"
AUDIENCE = "semantic-saga"


class SigningKey:
    def __init__(self, kid: str, alg: str = "RS256") -> None:
        self.kid = kid
        self.alg = alg
        self.private = (
            rsa.generate_private_key(public_exponent=65537, key_size=2048)
            if alg.startswith("RS")
            else ec.generate_private_key(ec.SECP256R1())
        )

    def public_jwk(self) -> dict[str, Any]:
        algorithm = jwt.algorithms.RSAAlgorithm if self.alg.startswith("RS") else jwt.algorithms.ECAlgorithm
        jwk: dict[str, Any] = json.loads(algorithm.to_jwk(self.private.public_key()))
        return {**jwk, "kid": self.kid, "use": "sig", "alg": self.alg}

    def sign(self, **overrides: Any) -> str:
        now = int(time.time())
        claims: dict[str, Any] = {
            "iss": ISSUER,
            "aud": AUDIENCE,
            "sub": "alice",
            "tenant_id": "acme",
            "roles": ["operator"],
            "iat": now,
            "exp": now + 300,
        }
        claims.update(overrides)
        claims = {k: v for k, v in claims.items() if v is not None}
        return jwt.encode(claims, self.private, algorithm=self.alg, headers={"kid": self.kid})


class JWKSServer:
    """Serves /jwks with whichever keys the test publishes right now, and counts fetches."""

    def __init__(self) -> None:
        self.keys: list[SigningKey] = []
        self.fetches = 0
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                server.fetches += 1
                body = json.dumps({"keys": [k.public_jwk() for k in server.keys]}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        threading.Thread(target=self._httpd.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}/jwks"

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
