"""Operators log into the admin through a real OpenID provider stub over local HTTP: authorization code flow with
PKCE, an RS256 id_token checked against the stub's JWKS, and userinfo; tenant and role come from the claims."""

from __future__ import annotations

import base64
import hashlib
import json
import runpy
import secrets
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit

import httpx
import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from django.contrib.auth.models import User
from django.core.exceptions import ImproperlyConfigured
from django.http import HttpResponse
from django.test import Client

from governance.identity.principal import Principal
from governance.models import OperatorProfile
from sagas import coordinator

CLIENT_ID = "semantic-saga-admin"
CLIENT_SECRET = "stub-client-secret"
SETTINGS_FILE = Path(__file__).resolve().parents[2] / "saga_project" / "settings.py"


# --- the OpenID provider stub ---------------------------------------------------------------------------------


@dataclass
class Grant:
    """What /authorize remembers for the code it hands out, until /token redeems it (once)."""

    redirect_uri: str
    nonce: str | None
    code_challenge: str | None
    sub: str
    id_claims: dict[str, Any]
    userinfo: dict[str, Any]


@dataclass
class OIDCProvider:
    """A minimal OpenID provider. `login_as` decides who "signs in" at the next /authorize."""

    key: rsa.RSAPrivateKey = field(
        default_factory=lambda: rsa.generate_private_key(public_exponent=65537, key_size=2048)
    )
    kid: str = "stub-key-1"
    sub: str = "user-1"
    id_claims: dict[str, Any] = field(default_factory=dict)
    userinfo: dict[str, Any] = field(default_factory=dict)
    grants: dict[str, Grant] = field(default_factory=dict)
    access_tokens: dict[str, dict[str, Any]] = field(default_factory=dict)
    token_requests: list[dict[str, str]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    httpd: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        assert self.httpd is not None
        host, port = self.httpd.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> OIDCProvider:
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        self.httpd.daemon_threads = True
        threading.Thread(target=self.httpd.serve_forever, name="oidc-stub", daemon=True).start()
        return self

    def stop(self) -> None:
        assert self.httpd is not None
        self.httpd.shutdown()
        self.httpd.server_close()

    def login_as(self, sub: str, *, id_claims: dict[str, Any] | None = None, **userinfo: Any) -> None:
        self.sub, self.id_claims, self.userinfo = sub, dict(id_claims or {}), dict(userinfo)

    def configuration(self) -> dict[str, Any]:
        return {
            "issuer": self.url,
            "authorization_endpoint": f"{self.url}/authorize",
            "token_endpoint": f"{self.url}/token",
            "userinfo_endpoint": f"{self.url}/userinfo",
            "jwks_uri": f"{self.url}/jwks",
            "response_types_supported": ["code"],
            "subject_types_supported": ["public"],
            "id_token_signing_alg_values_supported": ["RS256"],
            "code_challenge_methods_supported": ["S256"],
        }

    def jwks(self) -> dict[str, Any]:
        public = jwt.algorithms.RSAAlgorithm.to_jwk(self.key.public_key(), as_dict=True)
        return {"keys": [{**public, "kid": self.kid, "use": "sig", "alg": "RS256"}]}

    def authorize(self, query: dict[str, str]) -> tuple[int, dict[str, str]]:
        if query.get("client_id") != CLIENT_ID or query.get("response_type") != "code":
            return 400, {}
        code = secrets.token_urlsafe(16)
        with self.lock:
            self.grants[code] = Grant(
                redirect_uri=query["redirect_uri"],
                nonce=query.get("nonce"),
                code_challenge=query.get("code_challenge"),
                sub=self.sub,
                id_claims=dict(self.id_claims),
                userinfo=dict(self.userinfo),
            )
        back = urlencode({"code": code, "state": query["state"]})
        return 302, {"Location": f"{query['redirect_uri']}?{back}"}

    def token(self, form: dict[str, str]) -> tuple[int, dict[str, Any]]:
        with self.lock:
            self.token_requests.append(form)
            grant = self.grants.pop(form.get("code", ""), None)  # a code is redeemed at most once
        if form.get("client_id") != CLIENT_ID or form.get("client_secret") != CLIENT_SECRET:
            return 401, {"error": "invalid_client"}
        if grant is None or form.get("redirect_uri") != grant.redirect_uri or not _pkce_ok(grant, form):
            return 400, {"error": "invalid_grant"}
        access_token = secrets.token_urlsafe(24)
        with self.lock:
            self.access_tokens[access_token] = {"sub": grant.sub, **grant.userinfo}
        return 200, {"access_token": access_token, "token_type": "Bearer", "id_token": self.id_token(grant)}

    def id_token(self, grant: Grant) -> str:
        now = int(time.time())
        claims = {"iss": self.url, "aud": CLIENT_ID, "sub": grant.sub, "nonce": grant.nonce, "iat": now}
        claims |= {"exp": now + 300, **grant.id_claims}
        return jwt.encode(claims, self.key, algorithm="RS256", headers={"kid": self.kid})


def _pkce_ok(grant: Grant, form: dict[str, str]) -> bool:
    if grant.code_challenge is None:
        return "code_verifier" not in form
    digest = hashlib.sha256(form.get("code_verifier", "").encode("ascii")).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode() == grant.code_challenge


def _handler_for(provider: OIDCProvider) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            parts = urlsplit(self.path)
            query = dict(parse_qsl(parts.query))
            if parts.path == "/.well-known/openid-configuration":
                self._json(200, provider.configuration())
            elif parts.path == "/jwks":
                self._json(200, provider.jwks())
            elif parts.path == "/authorize":
                status, headers = provider.authorize(query)
                self._answer(status, b"", headers)
            elif parts.path == "/userinfo":
                token = self.headers.get("Authorization", "").removeprefix("Bearer ")
                userinfo = provider.access_tokens.get(token)
                self._json(200, userinfo) if userinfo else self._json(401, {"error": "invalid_token"})
            else:
                self._json(404, {"error": "not_found"})

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            form = dict(parse_qsl(self.rfile.read(length).decode()))
            if urlsplit(self.path).path == "/token":
                self._json(*provider.token(form))
            else:
                self._json(404, {"error": "not_found"})

        def _json(self, status: int, body: Any) -> None:
            self._answer(status, json.dumps(body).encode(), {"Content-Type": "application/json"})

        def _answer(self, status: int, body: bytes, headers: dict[str, str]) -> None:
            self.send_response(status)
            for name, value in headers.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return Handler


# --- fixtures and the browser's side of the flow -------------------------------------------------------------


@pytest.fixture(scope="module")
def provider() -> Iterator[OIDCProvider]:
    stub = OIDCProvider().start()
    yield stub
    stub.stop()


@pytest.fixture
def sso(provider: OIDCProvider, settings: Any) -> OIDCProvider:
    """OIDC enabled against the stub, as the OIDC_* environment variables would configure it."""
    provider.login_as("user-1")
    provider.token_requests.clear()
    settings.SAGA_OIDC_ENABLED = True
    settings.OIDC_RP_CLIENT_ID = CLIENT_ID
    settings.OIDC_RP_CLIENT_SECRET = CLIENT_SECRET
    settings.OIDC_OP_AUTHORIZATION_ENDPOINT = f"{provider.url}/authorize"
    settings.OIDC_OP_TOKEN_ENDPOINT = f"{provider.url}/token"
    settings.OIDC_OP_USER_ENDPOINT = f"{provider.url}/userinfo"
    settings.OIDC_OP_JWKS_ENDPOINT = f"{provider.url}/jwks"
    settings.OIDC_OP_ISSUER = provider.url
    return provider


def sso_login(client: Client, provider: OIDCProvider) -> HttpResponse:
    """Start at our login URL, let the provider "sign in" the user, and hand its redirect to our callback."""
    start = client.get("/oidc/authenticate/?next=/admin/")
    assert start.status_code == 302 and start["Location"].startswith(f"{provider.url}/authorize?")
    at_provider = httpx.get(start["Location"], follow_redirects=False)
    assert at_provider.status_code == 302
    back = urlsplit(at_provider.headers["location"])
    assert back.path == "/oidc/callback/"
    answer: HttpResponse = client.get(f"{back.path}?{back.query}")
    return answer


def _principal(tenant: str) -> Principal:
    return Principal(
        f"{tenant}-agent", tenant, principal_type="user", roles=frozenset({"operator"}), authenticated=True
    )


def _assert_refused(client: Client, answer: HttpResponse, *reason: str) -> None:
    assert answer.status_code == 302 and answer["Location"] == "/admin/login/"
    page = client.get("/admin/login/").content.decode()
    assert "Single sign-on did not log you in" in page
    for word in reason:
        assert word in page
    assert client.get("/admin/").status_code == 302  # still anonymous
    assert not User.objects.filter(username__startswith="oidc:").exists()


# --- the login flow --------------------------------------------------------------------------------------------


@pytest.mark.django_db
def test_sso_operator_sees_their_tenant_only(sso: OIDCProvider):
    # given sagas in two tenants, and an operator of acme at the identity provider
    mine = coordinator.saga_begin(actor=_principal("acme"))
    theirs = coordinator.saga_begin(actor=_principal("globex"))
    sso.login_as(
        "0a1b-alice",
        id_claims={"tenant_id": "acme", "roles": ["operator"]},
        email="alice@acme.test",
        given_name="Alice",
        family_name="Ops",
    )
    client = Client()

    # when she logs in through single sign-on
    answer = sso_login(client, sso)

    # then she lands in the admin as an acme operator, keyed by sub, staff but never superuser
    assert answer.status_code == 302 and answer["Location"] == "/admin/"
    assert client.get("/admin/").status_code == 200
    user = User.objects.get(username="oidc:0a1b-alice")
    assert (user.email, user.first_name, user.last_name) == ("alice@acme.test", "Alice", "Ops")
    assert user.is_staff and not user.is_superuser and not user.has_usable_password()
    profile = OperatorProfile.objects.get(user=user)
    assert (profile.tenant_id, profile.role) == ("acme", "operator")
    # and the saga changelist shows acme's saga and not globex's
    changelist = client.get("/admin/sagas/saga/")
    assert changelist.status_code == 200
    assert str(mine.id) in changelist.content.decode() and str(theirs.id) not in changelist.content.decode()
    # and the code was redeemed with PKCE
    assert "code_verifier" in sso.token_requests[-1]


@pytest.mark.django_db
def test_each_login_refreshes_role_and_tenant_from_claims(sso: OIDCProvider, settings: Any):
    # first login: a viewer of acme, roles in the id_token
    sso.login_as("bob", id_claims={"tenant_id": "acme", "roles": ["viewer"]})
    assert sso_login(Client(), sso)["Location"] == "/admin/"
    assert OperatorProfile.objects.get(user__username="oidc:bob").role == "viewer"

    # second login: promoted, tenant and roles now in userinfo (a space-separated roles string); highest role wins
    sso.login_as("bob", tid="globex", roles="viewer admin operator", email="bob@globex.test")
    assert sso_login(Client(), sso)["Location"] == "/admin/"
    profile = OperatorProfile.objects.get(user__username="oidc:bob")
    assert (profile.tenant_id, profile.role) == ("globex", "admin")

    # third login: no role we know of, so SAGA_OIDC_DEFAULT_ROLE applies
    settings.SAGA_OIDC_DEFAULT_ROLE = "operator"
    sso.login_as("bob", id_claims={"tenant_id": "globex", "roles": ["auditor"]})
    assert sso_login(Client(), sso)["Location"] == "/admin/"
    assert OperatorProfile.objects.get(user__username="oidc:bob").role == "operator"
    assert User.objects.filter(username__startswith="oidc:").count() == 1


@pytest.mark.django_db
def test_userinfo_wins_for_profile_fields(sso: OIDCProvider):
    sso.login_as("carol", id_claims={"tenant_id": "acme", "email": "old@acme.test"}, email="carol@acme.test")
    sso_login(Client(), sso)
    assert User.objects.get(username="oidc:carol").email == "carol@acme.test"


@pytest.mark.django_db
def test_claims_without_tenant_are_refused_and_create_nothing(sso: OIDCProvider):
    sso.login_as("dave", id_claims={"roles": ["admin"]}, email="dave@example.test")
    client = Client()
    _assert_refused(client, sso_login(client, sso), "no tenant claim")


@pytest.mark.django_db
def test_id_token_from_another_issuer_is_refused(sso: OIDCProvider, settings: Any):
    settings.OIDC_OP_ISSUER = "https://login.elsewhere.test"
    sso.login_as("erin", id_claims={"tenant_id": "acme"})
    client = Client()
    _assert_refused(client, sso_login(client, sso), "login.elsewhere.test")


@pytest.mark.django_db
def test_id_token_for_another_client_is_refused(sso: OIDCProvider):
    sso.login_as("frank", id_claims={"tenant_id": "acme", "aud": "some-other-app"})
    client = Client()
    _assert_refused(client, sso_login(client, sso), "another client")


@pytest.mark.django_db
def test_provider_rejecting_the_code_is_a_failed_login_not_an_error_page(sso: OIDCProvider, settings: Any):
    settings.OIDC_RP_CLIENT_SECRET = "not-the-secret"
    sso.login_as("grace", id_claims={"tenant_id": "acme"})
    client = Client()
    _assert_refused(client, sso_login(client, sso), "identity provider")


# --- Django accounts, the login page, and OIDC switched off ----------------------------------------------------


@pytest.mark.django_db
def test_password_login_still_works_with_oidc_enabled(sso: OIDCProvider):
    User.objects.create_superuser("root", "root@example.test", "pw")
    client = Client()
    answer = client.post("/admin/login/?next=/admin/", {"username": "root", "password": "pw", "next": "/admin/"})
    assert answer.status_code == 302 and answer["Location"] == "/admin/"
    assert client.get("/admin/").status_code == 200


@pytest.mark.django_db
def test_login_page_offers_sso_when_enabled(sso: OIDCProvider):
    page = Client().get("/admin/login/?next=/admin/sagas/saga/").content.decode()
    assert 'href="/oidc/authenticate/?next=/admin/sagas/saga/"' in page
    assert "Log in with single sign-on" in page


@pytest.mark.django_db
def test_login_page_has_no_sso_link_when_not_configured():
    page = Client().get("/admin/login/").content.decode()
    assert 'id="login-form"' in page and "single sign-on" not in page


@pytest.mark.django_db
@pytest.mark.parametrize("path", ["/oidc/authenticate/?next=/admin/", "/oidc/callback/?code=x&state=y"])
def test_oidc_urls_are_404_when_not_configured(path: str):
    assert Client().get(path).status_code == 404


# --- settings --------------------------------------------------------------------------------------------------

_ALL_OIDC = {
    "OIDC_RP_CLIENT_ID": "saga",
    "OIDC_OP_AUTHORIZATION_ENDPOINT": "https://id.example.test/authorize",
    "OIDC_OP_TOKEN_ENDPOINT": "https://id.example.test/token",
    "OIDC_OP_USER_ENDPOINT": "https://id.example.test/userinfo",
    "OIDC_OP_JWKS_ENDPOINT": "https://id.example.test/jwks",
}


def _load_settings(monkeypatch: pytest.MonkeyPatch, **env: str) -> dict[str, Any]:
    for name in [*_ALL_OIDC, "OIDC_RP_CLIENT_SECRET", "OIDC_OP_ISSUER"]:
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return runpy.run_path(str(SETTINGS_FILE))


def test_oidc_is_enabled_only_with_every_required_value(monkeypatch: pytest.MonkeyPatch):
    assert _load_settings(monkeypatch)["SAGA_OIDC_ENABLED"] is False
    loaded = _load_settings(monkeypatch, **_ALL_OIDC)
    assert loaded["SAGA_OIDC_ENABLED"] is True and loaded["OIDC_RP_SIGN_ALGO"] == "RS256"
    assert loaded["AUTHENTICATION_BACKENDS"][-1] == "django.contrib.auth.backends.ModelBackend"


@pytest.mark.parametrize(
    ("env", "missing"),
    [
        ({"OIDC_RP_CLIENT_ID": "saga"}, "OIDC_OP_AUTHORIZATION_ENDPOINT, OIDC_OP_TOKEN_ENDPOINT"),
        ({**_ALL_OIDC, "OIDC_OP_JWKS_ENDPOINT": ""}, "set OIDC_OP_JWKS_ENDPOINT as well"),
        ({"OIDC_OP_ISSUER": "https://id.example.test"}, "OIDC_RP_CLIENT_ID"),
    ],
)
def test_partial_oidc_configuration_names_what_is_missing(
    monkeypatch: pytest.MonkeyPatch, env: dict[str, str], missing: str
):
    with pytest.raises(ImproperlyConfigured, match=missing):
        _load_settings(monkeypatch, **env)
