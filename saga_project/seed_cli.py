"""`semantic-saga-mcp`: the command line of semantic-saga-mcp (the product this replaces), so its commands and CI
scripts work as written. Flags become our environment variables before Django loads settings (a flag wins over the
environment and `.env`, and is checked at start like any setting; the identity, lease, pool and telemetry flags are
saga_project.seed_flags'); the database is migrated on start (the old server created its tables itself); then
`semantic-saga mcp` (stdio) or `semantic-saga serve` runs.

Every start-up error a flag's value can cause names the flag as the user gave it, not the variable it became
(seed_flags.FlagTerms, built with the translation and applied wherever start-up reports: settings, the system checks,
`serve`'s own refusals). The port is checked before the database is touched, and the banner printed once it is bound.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from saga_project.cli import exit_on_misconfiguration, prepare_home
from saga_project.environment import load_dotenv
from saga_project.seed_flags import (
    MCP_SEED_VARIABLES,
    SEED_FILE_ROOT,
    FlagTerms,
    SeedFlagRefused,
    add_seed_flags,
    given_as,
    parse_seed_command,
    seed_environment,
    tcp_port,
)

PROGRAM = "semantic-saga-mcp"
# Where the seed looked for OPA's bearer token when --policy-opa-token-env was not given.
SEED_OPA_TOKEN_VARIABLE = "SAGA_OPA_TOKEN"


def _transport(value: str) -> str:
    """The seed's `--transport`; its deprecated `sse` is refused with the way forward, not a bare "invalid choice"."""
    if value == "sse":
        raise argparse.ArgumentTypeError(
            "sse, semantic-saga-mcp's deprecated dedicated SSE transport, is not served here. Use --transport "
            "streamable-http (served at /mcp, with SSE streams inside it, as current MCP clients speak it)"
        )
    return value


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROGRAM,
        description="Semantic Saga MCP server (semantic-saga-mcp compatible flags). Default: stdio, SQLite file.",
    )
    parser.add_argument("--transport", type=_transport, choices=["stdio", "streamable-http"], default="stdio")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=tcp_port, default=8000, help="1 to 65535 (default 8000).")
    parser.add_argument("--allowed-host", action="append", default=[], help="A Host name to accept (repeatable).")
    store = parser.add_mutually_exclusive_group()
    store.add_argument("--database", help="SQLite file (single node).")
    store.add_argument("--postgres-dsn", help="PostgreSQL DSN (several replicas).")
    parser.add_argument("--actions", help="Action registry file loaded at start-up.")
    parser.add_argument("--policy-mode", choices=["none", "json", "rego", "opa"], default="none")
    parser.add_argument("--policy-file")
    parser.add_argument("--policy-opa-url")
    parser.add_argument("--policy-opa-decision-path", default="semantic_saga/decision")
    parser.add_argument("--policy-opa-token-env", help="Name of the environment variable holding OPA's token.")
    parser.add_argument("--worker-id")
    parser.add_argument("--otel-endpoint", help="OTLP/HTTP endpoint (sets OTEL_EXPORTER_OTLP_ENDPOINT).")
    add_seed_flags(parser)
    return parser


def _environment(args: argparse.Namespace) -> dict[str, str]:
    """Our variables for the flags given (SeedFlagRefused for one we cannot honour); notes go to stderr."""
    translated = seed_environment(args)
    for note in translated.notes:
        print(f"{getattr(args, 'prog_name', PROGRAM)}: note: {note}", file=sys.stderr)
    env: dict[str, str] = {}
    if args.database:
        env["DATABASE_URL"] = f"sqlite:///{_database_path(args.database)}"
    if args.postgres_dsn:
        env["DATABASE_URL"] = args.postgres_dsn
    if args.actions:
        env["SAGA_ACTIONS_FILE"] = os.path.abspath(args.actions)
    # The seed's hosts were the MCP SDK's patterns, 'mcp.example.com:*' among them; ours accept any port of a host.
    args.allowed_host = list(dict.fromkeys(host.removesuffix(":*") for host in args.allowed_host))
    if args.allowed_host:
        current = os.environ.get("ALLOWED_HOSTS", "127.0.0.1,localhost,[::1]")
        env["ALLOWED_HOSTS"] = ",".join([current, *args.allowed_host])
    if not os.environ.get("SAGA_PUBLIC_URL") and (guess := _public_url_guess(args)):
        env["SAGA_PUBLIC_URL"] = guess  # what OAuth metadata and the agent card advertise, unless told otherwise
    if args.policy_mode != "none":
        env["SAGA_POLICY_MODE"] = args.policy_mode
    if args.policy_file:
        env["SAGA_POLICY_FILE"] = os.path.abspath(args.policy_file)
    if args.policy_opa_url:
        env["SAGA_OPA_URL"] = args.policy_opa_url
    # With the URL (the seed's default path came with it), or given alone for a URL the environment sets.
    if args.policy_opa_url or "policy_opa_decision_path" in getattr(args, "seed_flags_given", ()):
        env["SAGA_OPA_DECISION_PATH"] = args.policy_opa_decision_path
    if args.policy_opa_token_env:
        env["SAGA_OPA_TOKEN_ENV"] = args.policy_opa_token_env
    elif not os.environ.get("SAGA_OPA_TOKEN_ENV") and os.environ.get(SEED_OPA_TOKEN_VARIABLE):
        env["SAGA_OPA_TOKEN_ENV"] = SEED_OPA_TOKEN_VARIABLE  # the seed sent $SAGA_OPA_TOKEN to OPA unless told
    if args.worker_id:
        env["SAGA_WORKER_ID"] = args.worker_id
    if args.otel_endpoint:
        env["OTEL_EXPORTER_OTLP_ENDPOINT"] = args.otel_endpoint
    if args.transport == "stdio" and (args.auth_mode or "none") != "none":
        raise SeedFlagRefused(
            "--auth-mode needs --transport streamable-http: over stdio there is no HTTP request to carry a token "
            "(the local process acts as the admin), as semantic-saga-mcp also refused."
        )
    if not args.file_root and not os.environ.get("SAGA_FILE_ROOT"):
        # The seed's create_text_file wrote below ./saga-files, relative to where the command was started.
        env["SAGA_FILE_ROOT"] = os.path.abspath(SEED_FILE_ROOT)
    env.update(translated.env)
    if "DATABASE_URL" in env or os.environ.get("DATABASE_URL"):
        env.setdefault("SECRET_KEY", os.environ.get("SECRET_KEY", "") or os.urandom(32).hex())
    # Else the per-user home's database, and its key (saga_project.home), as `semantic-saga mcp` would use.
    args.flag_terms = FlagTerms.of(args, os.environ, env)  # start-up errors name what the user typed
    return env


def _database_path(database: str) -> str:
    return os.path.abspath(os.path.expanduser(database))


def make_database_directory(args: argparse.Namespace) -> None:
    """The seed created --database's directory when it was missing; so do we, or stop naming the path."""
    if not args.database:
        return
    directory = Path(_database_path(args.database)).parent
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        flag = given_as(args, "database", "--database")
        raise SeedFlagRefused(
            f"{flag} {args.database}: its directory {directory} does not exist and cannot be created "
            f"({exc.strerror}). Create it yourself, or give a file in a directory you can write."
        ) from None


def database_source(args: argparse.Namespace) -> str:
    """What set the database, for a start-up message: the flag (or the seed's variable) or DATABASE_URL."""
    if args.postgres_dsn:
        return given_as(args, "postgres_dsn", "--postgres-dsn")
    if args.database:
        return given_as(args, "database", "--database")
    return "DATABASE_URL"


def _public_url_guess(args: argparse.Namespace) -> str | None:
    """The first --allowed-host behind HTTPS, else the address bound (not a wildcard, which no client can use)."""
    if args.allowed_host:
        return f"https://{args.allowed_host[0]}"
    if args.transport == "stdio" or args.host in ("0.0.0.0", "::", "[::]"):
        return None
    host = f"[{args.host}]" if ":" in args.host and not args.host.startswith("[") else args.host
    return f"http://{host}:{args.port}"


def main(argv: list[str] | None = None) -> None:
    # .env first (as settings would read it), so a guessed value never beats it and a flag given always does.
    load_dotenv(Path(__file__).resolve().parent.parent / ".env")
    try:
        args = parse_seed_command(_parser(), MCP_SEED_VARIABLES, argv)  # the seed's SAGA_* variables too
        args.prog_name = PROGRAM
        os.environ.update(_environment(args))
        make_database_directory(args)
    except SeedFlagRefused as refused:
        sys.exit(f"{PROGRAM}: {refused}")
    serve = ["mcp"] if args.transport == "stdio" else ["serve", "--host", args.host, "--port", str(args.port)]
    start(PROGRAM, args, serve, allow_unauthenticated="--allow-unauthenticated-http")


def start(program: str, args: argparse.Namespace, command: list[str], *, allow_unauthenticated: str) -> None:
    """Set Django up and run `command` (migrate_and_serve) for a seed command line whose flags are in os.environ;
    every start-up error names the flags and variables as the user gave them (args.flag_terms)."""
    import django

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "saga_project.settings")
    terms: FlagTerms = getattr(args, "flag_terms", FlagTerms())
    unauthenticated = given_as(args, allow_unauthenticated.removeprefix("--").replace("-", "_"), allow_unauthenticated)

    def set_up() -> None:
        with _errors_in(terms):
            django.setup()  # settings.py: where a value that cannot work at all is refused

    def run() -> None:
        with _errors_in(terms):
            migrate_and_serve(
                program, command, database=database_source(args), allow_unauthenticated=unauthenticated, terms=terms
            )

    exit_on_misconfiguration(program, run, set_up=set_up)


@contextmanager
def _errors_in(terms: Callable[[str], str]) -> Iterator[None]:
    """Settings' refusal (ImproperlyConfigured, printed by exit_on_misconfiguration) in the user's terms."""
    from django.core.exceptions import ImproperlyConfigured

    try:
        yield
    except ImproperlyConfigured as exc:
        raise ImproperlyConfigured(terms(str(exc))) from None


def migrate_and_serve(
    program: str,
    command: list[str],
    *,
    database: str = "DATABASE_URL",
    allow_unauthenticated: str = "--allow-unauthenticated-http",
    terms: Callable[[str], str] = str,
) -> None:
    """Check the configuration first (a bad flag or file must not leave a fresh database behind), then what `serve`
    would refuse, in the seed's words, and that its port is free; make the per-user home ready as `semantic-saga mcp`
    / `serve` do (without a database configured), migrate, serve. `database` and `allow_unauthenticated` name what
    the user set; `terms` rewrites our variables in an error to what the user gave (seed_flags.FlagTerms)."""
    from django.conf import settings
    from django.core.management import call_command, execute_from_command_line
    from django.core.management.base import CommandError

    from governance.identity.listening import declare_listening, is_loopback
    from saga_project.checks import configuration_report
    from saga_project.startup_database import database_problem
    from sagas.management.commands.serve import listening_sockets

    host = command[command.index("--host") + 1] if "--host" in command else None
    if host is not None:  # before the checks read the token file: a short token depends on where we listen
        declare_listening(host)
    if report := configuration_report(program):
        sys.exit(terms(report))
    if problem := database_problem(database):  # before anything opens the pool, which would retry for seconds
        sys.exit(f"{program} did not start: {problem}")
    unauthenticated = settings.SAGA_AUTH_MODE == "none" and not settings.SAGA_ALLOW_UNAUTHENTICATED
    if host is not None and not is_loopback(host) and unauthenticated:  # serve's refusal, in the seed's terms
        sys.exit(
            f"{program} did not start: it would serve on {host} without authentication, and anyone who can "
            "reach it would act as an admin. Pass --auth-mode static or jwt (SAGA_AUTH_MODE; docs/identity.md), "
            f"bind --host 127.0.0.1, or pass {allow_unauthenticated} (SAGA_ALLOW_UNAUTHENTICATED=true) if a "
            "trusted proxy in front authenticates every request."
        )
    if host is not None:  # a port in use stops us before a fresh database is created for nothing
        port = int(command[command.index("--port") + 1])
        try:
            for probe in listening_sockets(host, port, program):  # bound, not listening; serve binds it again
                probe.close()
        except CommandError as busy:
            sys.exit(str(busy))
        command = [*command, "--program", program]
    prepare_home(command[0])  # the per-user home: created and migrated on first use, under its lock
    execute_from_command_line(["semantic-saga", "migrate", "--no-input", "--verbosity", "0", "--skip-checks"])
    try:
        call_command(*command)
    except CommandError as refused:  # serve's or mcp's own start-up refusals, as ours, not as a CommandError
        message = str(refused)
        sys.exit(terms(message if message.startswith(program) else f"{program} did not start: {message}"))


if __name__ == "__main__":
    main()
