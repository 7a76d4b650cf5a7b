"""Identity as semantic-saga-mcp's users configured it (review of issue 29): the issuer with or without its final /,
role names in any case, token files checked at start, the issuer a URL, the seed's OTel headers, origins and hosts
checked at start, and refusals naming every role and scope that would do."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.core.checks import run_checks
from django.core.exceptions import ImproperlyConfigured
from django.test import Client as DjangoClient

from governance.errors import AuthenticationFailed, Forbidden
from governance.identity import listening
from governance.identity.authentication import authenticate, protected_resource_metadata, token_verifier
from governance.identity.principal import Principal
from governance.identity.rbac import DECIDE, EXECUTE, authorize, can
from governance.identity.tokens import StaticTokenVerifier, same_issuer
from tests.governance.jwks import AUDIENCE, JWKSServer, SigningKey
from tests.seed_parity.seed_ci_harness import command, free_port

SEED_IDP = "https://idp.example.com"


@pytest.fixture(scope="module")
def key() -> SigningKey:
    return SigningKey("rsa-review")


@pytest.fixture(scope="module")
def jwks_server(key: SigningKey) -> Iterator[JWKSServer]:
    server = JWKSServer()
    server.keys = [key]
    yield server
    server.stop()


@pytest.fixture
def jwt_mode(jwks_server: JWKSServer, settings: Any) -> None:
    settings.SAGA_AUTH_MODE = "jwt"
    settings.SAGA_JWT_AUDIENCE = AUDIENCE
    settings.SAGA_JWT_JWKS_URL = jwks_server.url


@pytest.fixture
def loopback() -> Iterator[None]:
    before = listening.declared_host()
    listening.declare_listening("127.0.0.1")
    yield
    listening._declared_host = before


def _messages(check_id: str) -> list[str]:
    return [m.msg for m in run_checks() if m.id == check_id]


def _token_file(tmp_path: Path, settings: Any, tokens: dict[str, Any]) -> Path:
    # a new file each time: the verifier is kept per configuration, the file's path included
    path = tmp_path / f"tokens-{len(list(tmp_path.glob('tokens-*.json')))}.json"
    path.write_text(json.dumps(tokens), encoding="utf-8")
    settings.SAGA_AUTH_MODE, settings.SAGA_AUTH_STATIC_TOKENS = "static", str(path)
    return path


# --- 1. the issuer, final / aside ----------------------------------------------------------------------------------


@pytest.mark.parametrize("configured", [f"{SEED_IDP}/", SEED_IDP])
@pytest.mark.parametrize("claimed", [f"{SEED_IDP}/", SEED_IDP])
def test_the_issuer_matches_with_or_without_its_final_slash(
    jwt_mode: None, key: SigningKey, settings: Any, configured: str, claimed: str
):
    settings.SAGA_JWT_ISSUER = configured
    assert authenticate(f"Bearer {key.sign(iss=claimed)}", protocol="mcp").principal_id == "alice"


def test_another_issuer_is_refused_naming_both(jwt_mode: None, key: SigningKey, settings: Any):
    settings.SAGA_JWT_ISSUER = f"{SEED_IDP}/"
    for other in ("https://idp.example.com.evil.test", "https://idp.example.com/realms/x", "https://IDP.example.com"):
        with pytest.raises(AuthenticationFailed) as refused:
            authenticate(f"Bearer {key.sign(iss=other)}", protocol="mcp")
        assert other in refused.value.message and f"is {SEED_IDP}/, with or without a final /" in refused.value.message
    assert not same_issuer(None, SEED_IDP) and not same_issuer("", "") and not same_issuer(["x"], "x")


def test_the_metadata_names_the_issuer_as_configured(settings: Any):
    settings.SAGA_AUTH_MODE, settings.SAGA_JWT_ISSUER = "jwt", f"{SEED_IDP}/realms/acme/"
    assert protected_resource_metadata()["authorization_servers"] == [f"{SEED_IDP}/realms/acme/"]


# --- 2. role names in any case --------------------------------------------------------------------------------------


def test_an_identity_providers_capitalised_group_is_the_role(jwt_mode: None, key: SigningKey, settings: Any):
    settings.SAGA_JWT_ISSUER, settings.SAGA_JWT_ROLES_CLAIM = SEED_IDP, "groups"
    principal = authenticate(f"Bearer {key.sign(iss=SEED_IDP, roles=[], groups=[' Operator '])}", protocol="mcp")
    assert principal.roles == {"operator"} and can(principal, DECIDE)


def test_a_token_files_upper_case_roles_load_and_grant(tmp_path: Path, settings: Any):
    tokens = {
        "tokens": {"a-long-enough-token-0001": {"principal_id": "a", "tenant_id": "acme", "roles": ["OPERATOR"]}},
    }
    _token_file(tmp_path, settings, tokens)
    assert _messages("saga.E004") == [] and _messages("saga.E003") == []
    assert authenticate("Bearer a-long-enough-token-0001", protocol="mcp").roles == {"operator"}
    seed = {"seed-format-token-0001": {"client_id": "c", "claims": {"tenant_id": "acme", "roles": ["Admin"]}}}
    _token_file(tmp_path, settings, seed)
    assert _messages("saga.E004") == []
    assert authenticate("Bearer seed-format-token-0001", protocol="mcp").roles == {"admin"}
    # a misspelling is still one, in any case
    seed["seed-format-token-0001"]["claims"]["roles"] = ["OPERATER"]
    _token_file(tmp_path, settings, seed)
    assert ["operater" in message for message in _messages("saga.E004")] == [True]


def test_rbac_reads_a_principals_roles_in_any_case():
    assert can(Principal(principal_id="p", tenant_id="t", roles=frozenset({"Agent"})), EXECUTE)


# --- 3. token files checked at start --------------------------------------------------------------------------------


def test_an_empty_token_stops_start_up(tmp_path: Path, settings: Any, loopback: None):
    path = _token_file(tmp_path, settings, {"": {"client_id": "x", "claims": {"tenant_id": "acme"}}})
    with pytest.raises(ImproperlyConfigured, match=r"tokens entry 1 \(x\): its token is empty"):
        StaticTokenVerifier(str(path))
    assert ["its token is empty" in m for m in _messages("saga.E003")] == [True]
    ours = {"tokens": {"   ": {"principal_id": "a", "tenant_id": "acme"}}}
    with pytest.raises(ImproperlyConfigured, match="its token is empty"):
        StaticTokenVerifier(str(_token_file(tmp_path, settings, ours)))


@pytest.mark.parametrize(
    "tokens",
    [
        {"tokens": {"a-long-enough-token-0001": {"principal_id": "a", "tenant_id": "acme", "roles": "operator"}}},
        {"a-long-enough-token-0001": {"client_id": "a", "claims": {"tenant_id": "acme", "roles": "operator"}}},
    ],
)
def test_roles_written_as_a_string_are_refused_asking_for_a_list(tmp_path: Path, settings: Any, tokens: Any):
    path = _token_file(tmp_path, settings, tokens)
    with pytest.raises(ImproperlyConfigured) as refused:
        StaticTokenVerifier(str(path))
    assert '"roles" is the string "operator"; write a list of names: "roles": ["operator"]' in str(refused.value)
    assert "a-long-enough-token-0001" not in str(refused.value)
    assert len(_messages("saga.E003")) == 1


def test_scopes_that_are_not_a_list_are_refused(tmp_path: Path, settings: Any):
    tokens = {"tokens": {"a-long-enough-token-0001": {"principal_id": "a", "tenant_id": "acme", "scopes": 3}}}
    with pytest.raises(ImproperlyConfigured, match=r'"scopes" must be a list of names such as \["operator"\]'):
        StaticTokenVerifier(str(_token_file(tmp_path, settings, tokens)))


def test_an_already_expired_token_is_warned_of_at_start_without_its_value(
    tmp_path: Path, settings: Any, capsys: pytest.CaptureFixture[str]
):
    past, future = int(time.time()) - 60, int(time.time()) + 3600
    seed = {
        "an-expired-token-0001": {"client_id": "c", "subject": "old", "claims": {"tenant_id": "t"}, "expires_at": past},
        "a-current-token-00002": {
            "client_id": "c",
            "subject": "new",
            "claims": {"tenant_id": "t"},
            "expires_at": future,
        },
    }
    path = _token_file(tmp_path, settings, seed)
    assert StaticTokenVerifier(str(path)).expired_tokens == [f"{path}: tokens entry 1 (old)"]
    assert _messages("saga.W001") == [
        f"SAGA_AUTH_STATIC_TOKENS: 1 token(s) already expired: {path}: tokens entry 1 (old)."
    ]
    capsys.readouterr()
    token_verifier()
    warned = capsys.readouterr().err
    assert "1 static token(s) already expired" in warned and "tokens entry 1 (old)" in warned
    assert "an-expired-token-0001" not in warned
    token_verifier()  # once per configuration, not per request
    assert capsys.readouterr().err == ""
    with pytest.raises(AuthenticationFailed, match="expired"):
        authenticate("Bearer an-expired-token-0001", protocol="mcp")
    assert authenticate("Bearer a-current-token-00002", protocol="mcp").principal_id == "new"


# --- 4. the issuer a URL; metadata only where tokens are checked ------------------------------------------------------


@pytest.mark.parametrize(
    "issuer", ["not a url", "idp.example.com", "ftp://idp.example.com", "https://idp.example.com/?x=1"]
)
def test_an_issuer_that_is_no_http_url_stops_start_up(settings: Any, issuer: str):
    for mode in ("none", "jwt"):
        settings.SAGA_AUTH_MODE, settings.SAGA_JWT_ISSUER = mode, issuer
        assert len(_messages("saga.E013")) == 1, (mode, issuer)


def test_a_plain_http_issuer_is_accepted_as_the_seed_accepted_it(settings: Any):
    settings.SAGA_AUTH_MODE, settings.SAGA_JWT_ISSUER = "static", "http://idp.internal:8080/realms/acme"
    assert _messages("saga.E013") == [] and _messages("saga.W013") == []


@pytest.mark.django_db
def test_an_issuer_in_mode_none_is_warned_of_and_the_404_says_why(settings: Any):
    settings.SAGA_AUTH_MODE, settings.SAGA_JWT_ISSUER = "none", f"{SEED_IDP}/"
    assert ["SAGA_AUTH_MODE is none" in m for m in _messages("saga.W013")] == [True]
    answer = DjangoClient().get("/.well-known/oauth-protected-resource/mcp")
    reason = answer.json()["error_description"]
    assert (
        answer.status_code == 404 and f"SAGA_JWT_ISSUER is {SEED_IDP}/" in reason and "SAGA_AUTH_MODE is none" in reason
    )
    assert "set SAGA_JWT_ISSUER" not in reason
    settings.SAGA_JWT_ISSUER = ""
    reason = DjangoClient().get("/.well-known/oauth-protected-resource/mcp").json()["error_description"]
    assert "SAGA_AUTH_MODE=none" in reason


# --- 5. OTel headers, origins and hosts checked at start --------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "problem"),
    [("garbage", "'garbage', which is not key=value"), ("a=1,bad key=2", "'bad key' is not an HTTP header name")],
)
def test_malformed_otel_headers_stop_start_up(monkeypatch: pytest.MonkeyPatch, value: str, problem: str):
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_HEADERS", value)
    assert [problem in m for m in _messages("saga.E046")] == [True]


def test_well_formed_otel_headers_pass(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_HEADERS", "x-api-key=k, Authorization=Basic%20YTpi,x=a=b,")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_HEADERS", "nope")
    assert [m.startswith("OTEL_EXPORTER_OTLP_TRACES_HEADERS") for m in _messages("saga.E046")] == [True]


def test_allowed_origins_must_be_origins(settings: Any):
    settings.SAGA_ALLOWED_ORIGINS = ["https://app.example.com", "http://localhost:*", "http://[::1]:8000"]
    assert _messages("saga.E047") == []
    settings.SAGA_ALLOWED_ORIGINS = ["not a url", "https://app.example.com/", "https://a.example.com:70000"]
    (message,) = _messages("saga.E047")
    assert "'not a url' is not scheme://host[:port]" in message
    assert "ends in /" in message and "port 70000" in message


def test_allowed_hosts_must_be_host_names(settings: Any):
    settings.ALLOWED_HOSTS = ["127.0.0.1", "[::1]", "testserver", "mcp.example.com", ".example.com", "*.example.org"]
    assert _messages("saga.E048") == []
    settings.ALLOWED_HOSTS = ["bad host!", "https://mcp.example.com", "mcp.example.com:8000"]
    (message,) = _messages("saga.E048")
    assert "'bad host!' is not a host name" in message and "is a URL" in message and "has a port" in message


def test_the_seed_command_refuses_bad_headers_origins_hosts_and_issuer_before_serving(tmp_path: Path):
    flags = ["--transport", "streamable-http", "--host", "127.0.0.1", "--port", str(free_port())]
    flags += ["--database", str(tmp_path / "x.db"), "--otel-headers", "garbage", "--allowed-origin", "not a url"]
    flags += ["--allowed-host", "bad host!", "--auth-issuer", "not a url"]
    done = subprocess.run(
        [*command("semantic-saga-mcp"), *flags], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 1, done.stderr
    for check in ("saga.E046", "saga.E047", "saga.E048", "saga.E013"):
        assert check in done.stderr, done.stderr
    assert "Header format invalid" not in done.stderr  # OpenTelemetry's own warning: we refused before it parsed
    assert not (tmp_path / "x.db").exists()


# --- 6. refusals name every role and scope that would do ----------------------------------------------------------


def test_a_refused_call_names_the_seeds_operator_role_and_execute_scope_too():
    viewer = Principal(principal_id="v", tenant_id="t", roles=frozenset({"viewer"}))
    with pytest.raises(Forbidden) as refused:
        authorize(viewer, EXECUTE, "execute")
    assert (
        "role agent, operator or admin, or scope semantic-saga:call, semantic-saga:execute or semantic-saga:admin"
        in refused.value.message
    )
    with pytest.raises(Forbidden) as refused:
        authorize(viewer, DECIDE, "approve")
    assert "role operator or admin, or scope semantic-saga:execute or semantic-saga:admin" in refused.value.message
