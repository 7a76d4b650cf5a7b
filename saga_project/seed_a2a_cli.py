"""`semantic-saga-a2a`: the A2A command line of semantic-saga-mcp (the product this replaces), so its A2A quick-start
works as written. Flags become our environment variables (through semantic-saga-mcp's own translation, shared with
saga_project.seed_cli); the database is migrated on start; then `semantic-saga serve` runs, which serves A2A at /a2a
with the agent card at /.well-known/agent-card.json (and MCP at /mcp: one process, one port).
"""

from __future__ import annotations

import argparse
import ipaddress
import os
import sys
from pathlib import Path
from urllib.parse import urlsplit

from saga_project import seed_cli
from saga_project.environment import load_dotenv
from saga_project.seed_flags import A2A_SEED_VARIABLES, SeedFlagRefused, parse_seed_command

PROGRAM = "semantic-saga-a2a"

DEFAULT_PORT = 8100  # the seed README's A2A port
HTTP_TRANSPORT = "streamable-http"


def _parser() -> argparse.ArgumentParser:
    """semantic-saga-mcp's flags (storage, registry, policy, worker id, hosts, ...) plus the A2A ones: one list, so
    the two commands never drift apart."""
    parser = seed_cli._parser()
    parser.prog = PROGRAM
    parser.description = (
        "Semantic Saga as an A2A 1.0 peer (semantic-saga-a2a compatible flags). Default: SQLite file, "
        f"127.0.0.1:{DEFAULT_PORT}."
    )
    parser.add_argument(
        "--a2a-public-url",
        help="The URL peers reach this server at; the agent card advertises <url>/a2a (default: http://HOST:PORT).",
    )
    # Always HTTP: stdio carries MCP only (semantic-saga-mcp). The flag stays accepted, unlisted, for old scripts.
    parser.set_defaults(port=DEFAULT_PORT, transport=HTTP_TRANSPORT)
    for action in parser._actions:
        if "--transport" in action.option_strings:
            action.help = argparse.SUPPRESS
    return parser


def _public_url(args: argparse.Namespace) -> str:
    if args.a2a_public_url:
        return str(args.a2a_public_url).rstrip("/")
    host = args.host
    if _is_wildcard(host):
        # A wildcard bind is no address a peer can use; loopback at least works on this machine.
        print(
            f"semantic-saga-a2a: note: the agent card advertises http://127.0.0.1:{args.port}/a2a; pass "
            "--a2a-public-url with the address peers use to reach this server.",
            file=sys.stderr,
        )
        host = "127.0.0.1"
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"  # an IPv6 literal in a URL
    return f"http://{host}:{args.port}"


def _is_wildcard(host: str) -> bool:
    try:
        return ipaddress.ip_address(host.strip("[]")).is_unspecified
    except ValueError:
        return False


def _a2a_environment(args: argparse.Namespace) -> dict[str, str]:
    public_url = _public_url(args)
    public_host = urlsplit(public_url).hostname or ""
    # The public name must pass the Host check (TrustedHostMiddleware) when peers come through it.
    loopback = public_host in ("127.0.0.1", "localhost", "::1")
    if public_host and not loopback and public_host not in args.allowed_host:
        args.allowed_host = [*args.allowed_host, public_host]
    env = seed_cli._environment(args)
    env["SAGA_PUBLIC_URL"] = public_url  # wins over seed_cli's guess from --allowed-host
    return env


def main(argv: list[str] | None = None) -> None:
    load_dotenv(Path(__file__).resolve().parent.parent / ".env")  # see seed_cli.main
    try:
        args = parse_seed_command(_parser(), A2A_SEED_VARIABLES, argv)  # the seed A2A command's SAGA_* variables
        args.prog_name = PROGRAM
        if args.transport != HTTP_TRANSPORT:
            sys.exit("semantic-saga-a2a: A2A is served over HTTP only; for MCP over stdio run semantic-saga-mcp.")
        os.environ.update(_a2a_environment(args))
        seed_cli.make_database_directory(args)
    except SeedFlagRefused as refused:
        sys.exit(f"{PROGRAM}: {refused}")
    serve = ["serve", "--host", args.host, "--port", str(args.port)]
    seed_cli.start(PROGRAM, args, serve, allow_unauthenticated="--allow-unauthenticated-a2a")


if __name__ == "__main__":
    main()
