"""The seed's command lines start as a new user runs them: a fresh per-user home is created and migrated as
`semantic-saga mcp` does, a missing --database directory is created as the seed did, an unreachable PostgreSQL is
one line, a bad --port names the flag and the range, the wildcard-without-auth refusal names the seed's flags, and
the seed's own SAGA_* variables are read as its flags' defaults (a flag still wins)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from saga_project import home, seed_a2a_cli, seed_cli
from saga_project.seed_flags import A2A_SEED_VARIABLES, MCP_SEED_VARIABLES, SeedFlagRefused, parse_seed_command
from tests.distributed.workers import free_port
from tests.seed_parity.seed_ci_harness import INHERITED, command

UNREACHABLE_DSN = "postgresql://x:y@127.0.0.1:1/db"
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
}


def new_user(tmp_path: Path, **extra: str) -> dict[str, str]:
    """A new user's environment: nothing of ours configured, an empty home directory."""
    user_home = tmp_path / "user"
    user_home.mkdir(exist_ok=True)
    env = {name: os.environ[name] for name in INHERITED if name in os.environ}
    return {**env, "HOME": str(user_home), "XDG_DATA_HOME": "", **extra}


def run(program: str, flags: list[str], env: dict[str, str], cwd: Path, **kw: object) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*command(program), *flags], env=env, cwd=cwd, capture_output=True, text=True, timeout=120, **kw
    )


def answers_initialize(program: str, flags: list[str], env: dict[str, str], cwd: Path) -> dict:
    done = run(program, flags, env, cwd, input=json.dumps(INITIALIZE) + "\n")
    assert "Traceback" not in done.stderr, done.stderr
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    assert lines, done.stderr
    return json.loads(lines[0])


def test_the_default_command_line_sets_up_a_new_users_home(tmp_path: Path):
    env = new_user(tmp_path)
    answer = answers_initialize("semantic-saga-mcp", [], env, tmp_path)
    assert answer["result"]["serverInfo"]
    created = tmp_path / "user" / ".local" / "share" / home.APP_NAME
    assert (created / home.DATABASE_FILE).is_file() and (created / home.SECRET_KEY_FILE).is_file()


def test_a_saga_home_that_does_not_exist_yet_is_created(tmp_path: Path):
    chosen = tmp_path / "not" / "yet" / "there"
    answers_initialize("semantic-saga-mcp", [], new_user(tmp_path, SAGA_HOME=str(chosen)), tmp_path)
    assert (chosen / home.DATABASE_FILE).is_file()


def test_the_database_flags_missing_directory_is_created_as_the_seed_did(tmp_path: Path):
    database = tmp_path / "x" / "nodir" / "x.db"
    answers_initialize("semantic-saga-mcp", ["--database", str(database)], new_user(tmp_path), tmp_path)
    assert database.is_file()


def test_a_database_directory_that_cannot_be_made_is_one_line_naming_it(tmp_path: Path):
    (tmp_path / "a-file").write_text("")
    database = tmp_path / "a-file" / "x.db"
    done = run("semantic-saga-mcp", ["--database", str(database)], new_user(tmp_path), tmp_path, input="")
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert done.stderr.count("\n") == 1 and f"--database {database}" in done.stderr, done.stderr
    assert "cannot be created" in done.stderr


@pytest.mark.parametrize(
    ("program", "flags", "named"),
    [
        ("semantic-saga-mcp", ["--transport", "streamable-http", "--postgres-dsn", UNREACHABLE_DSN], "--postgres-dsn"),
        ("semantic-saga-a2a", ["--postgres-dsn", UNREACHABLE_DSN], "--postgres-dsn"),
    ],
)
def test_an_unreachable_postgresql_is_one_line_at_once(tmp_path: Path, program: str, flags: list[str], named: str):
    started = time.monotonic()
    port = str(free_port())
    done = run(program, [*flags, "--host", "127.0.0.1", "--port", port], new_user(tmp_path), tmp_path)
    assert time.monotonic() - started < 60
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.count("\n") == 1, done.stderr
    assert f"{program} did not start: cannot connect to PostgreSQL at 127.0.0.1:1" in done.stderr
    assert f"from {named}" in done.stderr and "Check that PostgreSQL is running" in done.stderr


def test_serve_with_an_unreachable_postgresql_is_one_line_too(tmp_path: Path):
    env = new_user(tmp_path, DATABASE_URL=UNREACHABLE_DSN, SECRET_KEY="k" * 60)
    done = subprocess.run(
        [sys.executable, "-m", "saga_project.cli", "serve", "--port", str(free_port())],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert "semantic-saga serve did not start: cannot connect to PostgreSQL at 127.0.0.1:1" in done.stderr
    assert "from DATABASE_URL" in done.stderr


def test_a_port_out_of_range_names_the_flag_and_the_range(tmp_path: Path):
    done = run("semantic-saga-mcp", ["--port", "70000"], new_user(tmp_path), tmp_path)
    assert done.returncode == 2 and "argument --port: 70000 is not a TCP port: give one from 1 to 65535" in done.stderr
    assert "SAGA_PUBLIC_URL" not in done.stderr
    done = run("semantic-saga-mcp", [], new_user(tmp_path, SAGA_PORT="70000"), tmp_path)
    assert done.returncode == 1 and "SAGA_PORT is '70000'" in done.stderr and "1 to 65535" in done.stderr


@pytest.mark.parametrize(
    ("program", "flags", "allow"),
    [
        ("semantic-saga-mcp", ["--transport", "streamable-http"], "--allow-unauthenticated-http"),
        ("semantic-saga-a2a", [], "--allow-unauthenticated-a2a"),
    ],
)
def test_a_wildcard_without_auth_is_refused_in_the_seeds_words(
    tmp_path: Path, program: str, flags: list[str], allow: str
):
    database = tmp_path / "never.db"
    args = [*flags, "--host", "0.0.0.0", "--port", str(free_port()), "--database", str(database)]
    done = run(program, args, new_user(tmp_path), tmp_path)
    refusal = done.stderr.splitlines()[-1]  # after semantic-saga-a2a's note about the wildcard in its card
    assert done.returncode == 1 and refusal.startswith(f"{program} did not start: "), done.stderr
    assert "CommandError" not in done.stderr and "--auth-mode" in done.stderr and allow in done.stderr
    assert not database.exists()


# --- the seed's environment variables ----------------------------------------------------------------------------


def mcp_env(environ: dict[str, str], *flags: str) -> dict[str, str]:
    return seed_cli._environment(parse_seed_command(seed_cli._parser(), MCP_SEED_VARIABLES, list(flags), environ))


def test_the_seeds_variables_set_what_its_flags_set(tmp_path: Path):
    args = parse_seed_command(
        seed_cli._parser(),
        MCP_SEED_VARIABLES,
        [],
        {
            "SAGA_TRANSPORT": "streamable-http",
            "SAGA_HOST": "127.0.0.2",
            "SAGA_PORT": "8125",
            "SAGA_ALLOWED_HOSTS": "mcp.example.com, other.example.com",
        },
    )
    assert (args.transport, args.host, args.port) == ("streamable-http", "127.0.0.2", 8125)
    assert args.allowed_host == ["mcp.example.com", "other.example.com"]
    database = tmp_path / "seed.db"
    env = mcp_env(
        {
            "SAGA_DATABASE": str(database),
            "SAGA_POSTGRES_POOL_MAX": "12",
            "SAGA_RECOVERY_LIMIT": "7",
            "SAGA_AUTH_JWT_ALGORITHMS": "ES256",
            "SAGA_AUTH_ISSUER": "https://id.example.com/",
            "SAGA_POLICY_OPA_TIMEOUT": "0.5",
            "SAGA_OTEL_SERVICE_NAME": "svc",
            "SAGA_ALLOW_UNAUTHENTICATED_HTTP": "yes",
        }
    )
    assert env["DATABASE_URL"] == f"sqlite:///{database}"
    assert env["SAGA_DB_POOL_MAX_SIZE"] == "12" and env["SAGA_RECOVERY_BATCH"] == "7"
    assert env["SAGA_JWT_ALGORITHMS"] == "ES256"  # the seed's variable replaced its RS256 default
    assert env["SAGA_JWT_ISSUER"] == "https://id.example.com/" and env["SAGA_OPA_TIMEOUT_SECONDS"] == "0.5"
    assert env["OTEL_SERVICE_NAME"] == "svc" and env["SAGA_ALLOW_UNAUTHENTICATED"] == "true"


def test_a_flag_wins_over_the_seeds_variable(tmp_path: Path):
    environ = {"SAGA_PORT": "8125", "SAGA_DATABASE": str(tmp_path / "variable.db")}
    args = parse_seed_command(seed_cli._parser(), MCP_SEED_VARIABLES, ["--port", "8126"], environ)
    assert args.port == 8126
    env = mcp_env(environ, "--postgres-dsn", "postgresql://u@127.0.0.1/db")
    assert env["DATABASE_URL"] == "postgresql://u@127.0.0.1/db"
    env = mcp_env({"SAGA_POSTGRES_DSN": "postgresql://u@127.0.0.1/db"}, "--database", str(tmp_path / "flag.db"))
    assert env["DATABASE_URL"] == f"sqlite:///{tmp_path / 'flag.db'}"
    env = mcp_env({"SAGA_AUTH_JWT_ALGORITHMS": "ES256"}, "--auth-jwt-algorithm", "PS256")
    assert env["SAGA_JWT_ALGORITHMS"] == "ES256,PS256"  # the seed's flags added to its variable's list


@pytest.mark.parametrize(
    ("variable", "refusal"),
    [
        (
            "SAGA_TRUST_IDENTITY_HEADERS",
            "SAGA_TRUST_IDENTITY_HEADERS (the seed's variable for --trust-identity-headers) is not supported",
        ),
        (
            "SAGA_DRY_RUN",
            "SAGA_DRY_RUN (the seed's variable for --dry-run) is not supported: Semantic Saga has no server-wide",
        ),
    ],
)
def test_a_refused_variable_set_truthy_is_refused_with_the_flags_reason(variable: str, refusal: str):
    for truthy in ("1", "true", "YES"):
        with pytest.raises(SeedFlagRefused, match=refusal.replace("(", r"\(").replace(")", r"\)")):
            mcp_env({variable: truthy})
    mcp_env({variable: "0"})  # the seed read anything else as false


def test_seed_variables_the_seed_could_not_read_either_are_refused_naming_them():
    with pytest.raises(SeedFlagRefused, match="SAGA_TRANSPORT is 'sse'"):
        mcp_env({"SAGA_TRANSPORT": "sse"})
    with pytest.raises(SeedFlagRefused, match="SAGA_RECOVERY_LIMIT is 'many'"):
        mcp_env({"SAGA_RECOVERY_LIMIT": "many"})
    with pytest.raises(SeedFlagRefused, match="SAGA_DATABASE and SAGA_POSTGRES_DSN are both set"):
        mcp_env({"SAGA_DATABASE": "a.db", "SAGA_POSTGRES_DSN": "postgresql://u@127.0.0.1/db"})


def test_the_a2a_command_reads_the_seed_a2a_commands_variables(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("SAGA_PUBLIC_URL", raising=False)
    environ = {"SAGA_A2A_PORT": "8131", "SAGA_A2A_PUBLIC_URL": "https://a2a.example.com", "SAGA_PORT": "9999"}
    args = parse_seed_command(seed_a2a_cli._parser(), A2A_SEED_VARIABLES, [], environ)
    assert args.port == 8131  # SAGA_PORT was the MCP command's, not the A2A command's
    assert seed_a2a_cli._a2a_environment(args)["SAGA_PUBLIC_URL"] == "https://a2a.example.com"
    with pytest.raises(SeedFlagRefused, match="SAGA_A2A_RPC_PATH"):
        parse_and_translate_a2a({"SAGA_A2A_RPC_PATH": "/rpc"})
    args = parse_seed_command(seed_a2a_cli._parser(), A2A_SEED_VARIABLES, [], {"SAGA_ALLOW_UNAUTHENTICATED_A2A": "1"})
    assert seed_a2a_cli._a2a_environment(args)["SAGA_ALLOW_UNAUTHENTICATED"] == "true"


def parse_and_translate_a2a(environ: dict[str, str]) -> dict[str, str]:
    return seed_a2a_cli._a2a_environment(parse_seed_command(seed_a2a_cli._parser(), A2A_SEED_VARIABLES, [], environ))


# --- where create_text_file writes -------------------------------------------------------------------------------


def test_the_seed_commands_file_root_is_saga_files_in_the_current_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.delenv("SAGA_FILE_ROOT", raising=False)
    monkeypatch.chdir(tmp_path)
    for flags in ([], ["--database", "x.db"], ["--postgres-dsn", "postgresql://u@127.0.0.1/db"]):
        assert mcp_env({}, *flags)["SAGA_FILE_ROOT"] == str(tmp_path / "saga-files")
    monkeypatch.setenv("SAGA_FILE_ROOT", str(tmp_path / "mine"))
    assert "SAGA_FILE_ROOT" not in mcp_env({})  # the variable (the seed's too) is read by our settings as it is


def test_our_default_file_root_is_never_inside_an_installed_package(tmp_path: Path):
    installed = tmp_path / "venv" / "lib" / "python3.11" / "site-packages"
    installed.mkdir(parents=True)
    (installed / "pyproject.toml").write_text("")  # even with a stray pyproject.toml there
    user_home = tmp_path / "home"
    assert home.default_file_root(installed, user_home, uses_home=False) == user_home / "saga-files"
    assert home.default_file_root(installed, user_home, uses_home=True) == user_home / "saga-files"
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    (checkout / "pyproject.toml").write_text("")
    assert home.default_file_root(checkout, user_home, uses_home=False) == checkout / "saga-files"
    assert home.default_file_root(checkout, user_home, uses_home=True) == user_home / "saga-files"
