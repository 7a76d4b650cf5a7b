"""The seed's command-line flags as our variables (saga_project.seed_flags): each given flag sets the variable the
docs table names, defaults leave the environment alone, and flags we cannot honour stop the command saying why."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from saga_project.seed_cli import _environment, _parser
from saga_project.seed_flags import SeedFlagRefused
from tests.seed_parity.seed_ci_harness import command

HTTP = ["--transport", "streamable-http", "--host", "127.0.0.1", "--port", "8124"]


def translate(*flags: str) -> dict[str, str]:
    return _environment(_parser().parse_args([*HTTP, *flags]))


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        (["--auth-mode", "jwt"], {"SAGA_AUTH_MODE": "jwt"}),
        (["--auth-issuer", "https://id.example.com/"], {"SAGA_JWT_ISSUER": "https://id.example.com/"}),
        (["--auth-audience", "https://mcp.example.com"], {"SAGA_JWT_AUDIENCE": "https://mcp.example.com"}),
        (["--auth-jwks-url", "https://id.example.com/jwks"], {"SAGA_JWT_JWKS_URL": "https://id.example.com/jwks"}),
        (["--auth-jwt-algorithm", "ES256"], {"SAGA_JWT_ALGORITHMS": "RS256,ES256"}),
        (["--auth-required-scope", "a", "--auth-required-scope", "b"], {"SAGA_AUTH_REQUIRED_SCOPES": "a,b"}),
        (["--auth-tenant-claim", "org"], {"SAGA_JWT_TENANT_CLAIMS": "tenant_id,tid,org_id,org"}),
        (["--auth-roles-claim", "groups"], {"SAGA_JWT_ROLES_CLAIM": "groups"}),
        (["--auth-principal-type-claim", "kind"], {"SAGA_JWT_PRINCIPAL_TYPE_CLAIM": "kind"}),
        (["--auth-allow-missing-tenant"], {"SAGA_JWT_ALLOW_MISSING_TENANT": "true"}),
        (["--auth-resource-url", "https://mcp.example.com/mcp"], {"SAGA_PUBLIC_URL": "https://mcp.example.com"}),
        (["--lease-seconds", "2"], {"SAGA_LEASE_SECONDS": "2"}),
        (["--lease-seconds", "2.5"], {"SAGA_LEASE_SECONDS": "2.5"}),
        (["--recovery-limit", "7"], {"SAGA_RECOVERY_BATCH": "7"}),
        (["--postgres-pool-min", "2", "--postgres-pool-max", "20"], {"SAGA_DB_POOL_MIN_SIZE": "2"}),
        (["--postgres-pool-max", "20"], {"SAGA_DB_POOL_MAX_SIZE": "20"}),
        (["--allowed-origin", "https://app.example.com"], {"SAGA_ALLOWED_ORIGINS": "https://app.example.com"}),
        (["--allow-unauthenticated-http"], {"SAGA_ALLOW_UNAUTHENTICATED": "true"}),
        (["--allow-unauthenticated-a2a"], {"SAGA_ALLOW_UNAUTHENTICATED": "true"}),
        (["--policy-opa-timeout", "0.5"], {"SAGA_OPA_TIMEOUT_SECONDS": "0.5"}),
        (["--otel-headers", "x-api-key=k"], {"OTEL_EXPORTER_OTLP_HEADERS": "x-api-key=k"}),
        (["--otel-service-name", "svc"], {"OTEL_SERVICE_NAME": "svc"}),
        (["--file-root", "files"], {"SAGA_FILE_ROOT": os.path.abspath("files")}),
        (["--auth-static-tokens", "t.json"], {"SAGA_AUTH_STATIC_TOKENS": os.path.abspath("t.json")}),
    ],
    ids=lambda value: " ".join(value) if isinstance(value, list) else "",
)
def test_each_seed_flag_sets_our_variable(flags: list[str], expected: dict[str, str]):
    env = translate(*flags)
    assert {key: env.get(key) for key in expected} == expected


def test_flags_not_given_leave_the_environment_alone(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("SAGA_PUBLIC_URL", "https://saga.example.com")
    monkeypatch.setenv("SAGA_FILE_ROOT", "/srv/files")  # unset, the seed's ./saga-files (test_seed_start_up.py)
    env = translate()
    untouched = {"SAGA_AUTH_MODE", "SAGA_LEASE_SECONDS", "SAGA_JWT_ALGORITHMS", "SAGA_PUBLIC_URL", "SAGA_FILE_ROOT"}
    assert not untouched & set(env)


def test_the_address_bound_is_the_public_url_when_nothing_says_otherwise(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("SAGA_PUBLIC_URL", raising=False)
    assert translate()["SAGA_PUBLIC_URL"] == "http://127.0.0.1:8124"


@pytest.mark.parametrize(
    ("flags", "reason"),
    [
        (["--trust-identity-headers"], "never takes identity from X-Semantic-Saga-* headers"),
        (["--dry-run"], "no server-wide dry run"),
        (["--a2a-rpc-path", "/rpc"], "served at /a2a"),
        (["--auth-resource-url", "https://mcp.example.com/api"], "must end in /mcp"),
    ],
)
def test_flags_we_cannot_honour_are_refused_with_the_reason(flags: list[str], reason: str):
    with pytest.raises(SeedFlagRefused, match=reason.replace("*", r"\*")):
        translate(*flags)


def test_the_deprecated_sse_transport_is_refused_with_the_way_forward(capsys: pytest.CaptureFixture[str]):
    with pytest.raises(SystemExit) as stopped:
        _parser().parse_args(["--transport", "sse"])
    error = capsys.readouterr().err
    assert stopped.value.code == 2
    assert "--transport: sse, semantic-saga-mcp's deprecated" in error and "Use --transport streamable-http" in error


def test_a_refused_flag_ends_the_command_before_anything_starts(tmp_path: Path):
    database = tmp_path / "never.db"
    done = subprocess.run(
        [*command("semantic-saga-mcp"), *HTTP, "--database", str(database), "--dry-run"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1 and "semantic-saga-mcp: --dry-run is not supported" in done.stderr
    assert not database.exists()


def test_a_flag_without_effect_here_is_accepted_with_a_note(capsys: pytest.CaptureFixture[str]):
    translate("--allow-legacy-action-recovery")
    assert "--allow-legacy-action-recovery has no effect here" in capsys.readouterr().err


def test_auth_over_stdio_is_refused_as_the_seed_refused_it():
    with pytest.raises(SeedFlagRefused, match="needs --transport streamable-http"):
        _environment(_parser().parse_args(["--auth-mode", "static", "--auth-static-tokens", "t.json"]))


@pytest.mark.parametrize("program", ["semantic-saga-mcp", "semantic-saga-a2a"])
def test_version_and_help_name_the_seed_flags(program: str):
    version = subprocess.run([*command(program), "--version"], capture_output=True, text=True, timeout=120)
    helped = subprocess.run([*command(program), "--help"], capture_output=True, text=True, timeout=120)
    assert version.returncode == 0 and version.stdout.startswith(program)
    for flag in ("--auth-mode", "--lease-seconds", "--recovery-limit", "--allow-unauthenticated-a2a", "--a2a-rpc-path"):
        assert flag in helped.stdout, flag
    assert sys.executable  # the scripts run in this interpreter's environment


def test_a_lease_below_two_seconds_stops_start_up_with_the_reason():
    from tests.startup import refused_at_start_up

    assert "at least 2" in refused_at_start_up("SAGA_LEASE_SECONDS", "1.5")


def test_opa_gets_the_seeds_default_token_variable_when_it_is_set(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("SAGA_OPA_TOKEN_ENV", raising=False)
    monkeypatch.delenv("SAGA_OPA_TOKEN", raising=False)
    assert "SAGA_OPA_TOKEN_ENV" not in translate()
    monkeypatch.setenv("SAGA_OPA_TOKEN", "opa-secret")
    assert translate()["SAGA_OPA_TOKEN_ENV"] == "SAGA_OPA_TOKEN"
    assert translate("--policy-opa-token-env", "MY_OPA")["SAGA_OPA_TOKEN_ENV"] == "MY_OPA"


def test_allowed_origins_add_to_the_variable_as_in_the_seed(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("SAGA_ALLOWED_ORIGINS", "https://a.example.com")
    env = translate("--allowed-origin", "https://b.example.com")
    assert env["SAGA_ALLOWED_ORIGINS"] == "https://a.example.com,https://b.example.com"


def test_the_readmes_host_port_patterns_become_plain_hosts(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("SAGA_PUBLIC_URL", raising=False)
    monkeypatch.delenv("ALLOWED_HOSTS", raising=False)
    env = translate("--allowed-host", "mcp.example.com:*", "--allowed-host", "mcp.example.com")
    assert env["ALLOWED_HOSTS"].split(",")[3:] == ["mcp.example.com"]
    assert env["SAGA_PUBLIC_URL"] == "https://mcp.example.com"
