"""Start-up errors in the words the user typed: a seed command line's configuration errors name its flags (as
semantic-saga-mcp spells them, however abbreviated), not the variables they became; `semantic-saga serve` started
with our variables still names our variables; and a port already in use is one line saying which port and what to
do, with no banner before it. Real entry points, as subprocesses, on 127.0.0.1 only."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from saga_project import seed_a2a_cli, seed_cli
from saga_project.seed_flags import (
    A2A_SEED_VARIABLES,
    FLAG_VARIABLES,
    MCP_SEED_VARIABLES,
    FlagTerms,
    parse_seed_command,
)
from tests.distributed.workers import free_port
from tests.seed_parity.test_seed_start_up import new_user, run

BANNER = "Semantic Saga on"
GOOD_TOKEN = "a-long-random-token-for-alice"


def http(port: int | None = None) -> list[str]:
    return ["--transport", "streamable-http", "--host", "127.0.0.1", "--port", str(port or free_port())]


def refused(program: str, flags: list[str], tmp_path: Path, **env: str) -> str:
    """Start `program` with `flags` and a fresh --database; assert it stopped before creating the database, and
    return its stderr."""
    database = tmp_path / "never.db"
    extra = http() if program == "semantic-saga-mcp" else ["--host", "127.0.0.1", "--port", str(free_port())]
    done = run(program, [*extra, "--database", str(database), *flags], new_user(tmp_path, **env), tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "Traceback" not in done.stderr and "CommandError" not in done.stderr, done.stderr
    assert BANNER not in done.stdout + done.stderr
    assert not database.exists()
    return done.stderr


def write(tmp_path: Path, name: str, content: object) -> str:
    path = tmp_path / name
    path.write_text(content if isinstance(content, str) else json.dumps(content), encoding="utf-8")
    return str(path)


# --- seed flags ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("program", ["semantic-saga-mcp", "semantic-saga-a2a"])
def test_an_abbreviated_auth_mode_without_tokens_names_the_seed_flags(program: str, tmp_path: Path):
    stderr = refused(program, ["--auth-mod", "static"], tmp_path)
    assert f"{program}: configuration error: --auth-mode static needs --auth-static-tokens" in stderr, stderr
    assert "SAGA_" not in stderr and stderr.count("\n") == 1


def test_jwt_without_its_settings_names_the_missing_flags(tmp_path: Path):
    stderr = refused("semantic-saga-mcp", ["--auth-mode", "jwt", "--auth-iss", "https://id.example.com/"], tmp_path)
    assert "--auth-mode jwt needs --auth-issuer, --auth-audience and --auth-jwks-url" in stderr, stderr
    assert "--auth-audience, --auth-jwks-url not set" in stderr and "SAGA_" not in stderr


@pytest.mark.parametrize(
    ("flags", "named", "check_id"),
    [
        (
            ["--policy-mode", "json", "--policy-file", "{dir}/missing.json"],
            ["--policy-file names", "and --policy-mode json needs it", "or pass --policy-mode none"],
            "saga.E020",
        ),
        (
            ["--policy-mode", "json", "--policy-file", "{dir}/typo.json"],
            ["--policy-file: ", "tenants.acme.budgets.max_paralel", "did you mean max_parallel?"],
            "saga.E021",
        ),
        (["--actions", "{dir}/missing.json"], ["--actions: The registry file", "point --actions at"], "saga.E030"),
        (
            ["--auth-mode", "static", "--auth-static-tokens", "{dir}/tokens.json"],
            ["--auth-static-tokens: ", "unknown role(s) operater"],
            "saga.E004",
        ),
        (
            ["--policy-mode", "opa", "--policy-opa-url", "127.0.0.1:8181"],
            ["--policy-opa-url is '127.0.0.1:8181', which is not an absolute http:// or https:// URL"],
            "saga.E023",
        ),
        (["--policy-mode", "opa", "--policy-opa-url", "http://127.0.0.1:1", "--policy-opa-ti", "0"], [], "saga.E024"),
        (["--otel-endpoint", "localhost:4318"], ["--otel-endpoint is 'localhost:4318'"], "saga.E041"),
        (["--lease-seconds", "1"], ["configuration error: --lease-seconds must be at least 2 (got 1)"], None),
    ],
    ids=[
        "policy file missing",
        "policy typo",
        "actions missing",
        "unknown role",
        "opa url",
        "opa timeout",
        "otel",
        "lease",
    ],
)
def test_other_seed_flag_errors_name_the_flag(flags: list[str], named: list[str], check_id: str | None, tmp_path: Path):
    write(tmp_path, "typo.json", {"schema_version": 1, "tenants": {"acme": {"budgets": {"max_paralel": 2}}}})
    write(
        tmp_path,
        "tokens.json",
        {"tokens": {GOOD_TOKEN: {"principal_id": "a", "tenant_id": "t", "roles": ["operater"]}}},
    )
    stderr = refused("semantic-saga-mcp", [flag.format(dir=tmp_path) for flag in flags], tmp_path)
    for words in named:
        assert words in stderr, stderr
    if check_id == "saga.E024":  # the check named both; the seed user sees the flag once
        assert "--policy-opa-timeout is 0; the OPA timeout must be" in stderr and "(--policy-opa-timeout)" not in stderr
    assert check_id is None or check_id in stderr
    assert "SAGA_" not in stderr and "OTEL_EXPORTER" not in stderr, stderr


def test_what_the_user_set_in_the_environment_keeps_its_name(tmp_path: Path):
    # our variable in the environment, the seed's flag on the command line: each named as it was given
    stderr = refused(
        "semantic-saga-mcp", ["--policy-mode", "json"], tmp_path, SAGA_POLICY_FILE=str(tmp_path / "missing.json")
    )
    assert "SAGA_POLICY_FILE names" in stderr and "and --policy-mode json needs it" in stderr, stderr
    # the seed's own variable for a flag: that variable, not ours
    env = {"SAGA_AUTH_ISSUER": "id.example.com"}
    flags = ["--auth-mode", "jwt", "--auth-audience", "aud", "--auth-jwks-url", "https://id.example.com/jwks"]
    stderr = refused("semantic-saga-mcp", flags, tmp_path, **env)
    assert "SAGA_AUTH_ISSUER is 'id.example.com'" in stderr and "SAGA_JWT_ISSUER" not in stderr, stderr


def test_serve_started_with_our_variables_still_names_them(tmp_path: Path):
    env = new_user(tmp_path, DATABASE_URL=f"sqlite:///{tmp_path / 'db.sqlite3'}", SECRET_KEY="k" * 60)
    done = serve(["--port", str(free_port())], {**env, "SAGA_AUTH_MODE": "static"}, tmp_path)
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert "SAGA_AUTH_MODE=static needs SAGA_AUTH_STATIC_TOKENS" in done.stderr and "--auth-" not in done.stderr
    env |= {"SAGA_POLICY_MODE": "json", "SAGA_POLICY_FILE": str(tmp_path / "missing.json")}
    done = serve(["--port", str(free_port())], env, tmp_path)
    assert done.returncode == 1 and "SAGA_POLICY_FILE names" in done.stderr, done.stderr
    assert "SAGA_POLICY_MODE=json needs it" in done.stderr and "--policy-" not in done.stderr


# --- a port already in use ----------------------------------------------------------------------------------------


@pytest.fixture
def busy_port() -> Iterator[int]:
    """A port on 127.0.0.1 another process (this test) is listening on."""
    holder = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        holder.bind(("127.0.0.1", 0))
        holder.listen(1)
        yield holder.getsockname()[1]
    finally:
        holder.close()


def serve(flags: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "saga_project.cli", "serve", *flags],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )


def assert_port_refused(done: subprocess.CompletedProcess[str], program: str, port: int) -> None:
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stdout + done.stderr
    assert BANNER not in done.stdout + done.stderr, done.stdout  # no banner: nothing was ever served
    assert (
        f"{program} did not start: port {port} on 127.0.0.1 is already in use: another process is listening there. "
        "Pick a free port with --port N, or stop that process"
    ) in done.stderr, done.stderr


@pytest.mark.parametrize("program", ["semantic-saga-mcp", "semantic-saga-a2a"])
def test_a_busy_port_stops_a_seed_command_line_before_its_database_and_banner(
    program: str, busy_port: int, tmp_path: Path
):
    database = tmp_path / "never.db"
    flags = ["--transport", "streamable-http"] if program == "semantic-saga-mcp" else []
    flags += ["--host", "127.0.0.1", "--port", str(busy_port), "--database", str(database)]
    done = run(program, flags, new_user(tmp_path), tmp_path)
    assert_port_refused(done, program, busy_port)
    assert "CommandError" not in done.stderr and done.stderr.count("\n") == 1
    assert not database.exists()  # stopped before a fresh database was created and migrated


def test_a_busy_port_stops_serve_with_the_same_words_and_no_banner(busy_port: int, tmp_path: Path):
    env = new_user(tmp_path, DATABASE_URL=f"sqlite:///{tmp_path / 'db.sqlite3'}", SECRET_KEY="k" * 60)
    migrated = subprocess.run(
        [sys.executable, "-m", "saga_project.cli", "migrate", "--no-input", "--verbosity", "0"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert migrated.returncode == 0, migrated.stderr
    assert_port_refused(
        serve(["--host", "127.0.0.1", "--port", str(busy_port)], env, tmp_path), "semantic-saga serve", busy_port
    )


# --- the map from flags to variables (in process) ----------------------------------------------------------------

SAMPLES = {
    "--database": "x.db",
    "--postgres-dsn": "postgresql://u@127.0.0.1/db",
    "--actions": "actions.json",
    "--allowed-host": "mcp.example.com",
    "--policy-mode": "json",
    "--policy-file": "policy.json",
    "--policy-opa-url": "http://127.0.0.1:8181",
    "--policy-opa-decision-path": "acme/decision",
    "--policy-opa-token-env": "OPA_TOKEN",
    "--policy-opa-timeout": "3",
    "--worker-id": "w1",
    "--otel-endpoint": "http://127.0.0.1:4318",
    "--otel-headers": "x-key=k",
    "--otel-service-name": "svc",
    "--auth-mode": "jwt",
    "--auth-static-tokens": "tokens.json",
    "--auth-issuer": "https://id.example.com/",
    "--auth-audience": "aud",
    "--auth-jwks-url": "https://id.example.com/jwks",
    "--auth-jwt-algorithm": "ES256",
    "--auth-tenant-claim": "org",
    "--auth-roles-claim": "groups",
    "--auth-principal-type-claim": "kind",
    "--auth-required-scope": "read",
    "--auth-resource-url": "https://mcp.example.com/mcp",
    "--a2a-public-url": "https://a2a.example.com",
    "--allowed-origin": "https://app.example.com",
    "--file-root": "files",
    "--lease-seconds": "3",
    "--recovery-limit": "5",
    "--postgres-pool-min": "1",
    "--postgres-pool-max": "5",
}


def translated(flags: list[str]) -> tuple[dict[str, str], FlagTerms]:
    a2a = "--a2a-public-url" in flags
    parser, variables = (
        (seed_a2a_cli._parser(), A2A_SEED_VARIABLES) if a2a else (seed_cli._parser(), MCP_SEED_VARIABLES)
    )
    args = parse_seed_command(parser, variables, [*http(8124), *flags], {})
    env = seed_a2a_cli._a2a_environment(args) if a2a else seed_cli._environment(args)
    return env, args.flag_terms


@pytest.mark.parametrize(("flag", "variable"), FLAG_VARIABLES, ids=[flag for flag, _ in FLAG_VARIABLES])
def test_each_flag_in_the_map_sets_its_variable_and_is_named_for_it(
    flag: str, variable: str, monkeypatch: pytest.MonkeyPatch
):
    for name in {v for _, v in FLAG_VARIABLES} | {"SAGA_OPA_URL"}:
        monkeypatch.delenv(name, raising=False)
    given = [flag, SAMPLES[flag]] if flag in SAMPLES else [flag]
    # abbreviated as argparse allows: still this flag
    typed = [flag[:-1] if flag == "--policy-opa-timeout" else flag, *given[1:]]
    env, terms = translated(typed)
    without, _ = translated(["--a2a-public-url", "https://other.example.com"] if flag == "--a2a-public-url" else [])
    assert env.get(variable) != without.get(variable), (flag, variable)
    assert terms.names.get(variable) == flag


def test_a_variable_nobody_set_is_named_by_the_flag_that_would_set_it(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("SAGA_AUTH_STATIC_TOKENS", raising=False)
    monkeypatch.setenv("SAGA_POLICY_FILE", "/srv/policy.json")
    _, terms = translated(["--auth-mode", "static"])
    assert terms("SAGA_AUTH_MODE=static needs SAGA_AUTH_STATIC_TOKENS=FILE.") == (
        "--auth-mode static needs --auth-static-tokens FILE."
    )
    assert terms("SAGA_POLICY_FILE names x") == "SAGA_POLICY_FILE names x"  # set by the user: ours
    assert terms("SAGA_PUBLIC_URL is bad") == "SAGA_PUBLIC_URL is bad"  # guessed from --host and --port: ours
    assert terms("set SAGA_ALLOW_UNAUTHENTICATED=true") == "set SAGA_ALLOW_UNAUTHENTICATED=true"  # two flags set it
    assert os.environ["SAGA_POLICY_FILE"] == "/srv/policy.json"
