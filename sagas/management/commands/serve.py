"""`semantic-saga serve`: the one ASGI app (MCP at /mcp, A2A at /a2a and its card, admin, /healthz) under uvicorn.

The port is bound here, before the banner, and the bound sockets handed to uvicorn: the banner is printed only once
the port is ours, and a port in use is one message saying which port and what to do (not uvicorn's errno line after
a banner that said we were serving).
"""

from __future__ import annotations

import argparse
import errno
import socket
import sys
from typing import Any

import uvicorn
from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from uvicorn.config import STARTUP_FAILURE

from governance.identity.authentication import token_verifier
from governance.identity.listening import declare_listening, is_loopback
from governance.identity.tokens import MIN_TOKEN_LENGTH, StaticTokenVerifier
from registry.defaults import register_defaults
from registry.errors import RegistryError
from registry.services import registry_load_file
from saga_project.checks import configuration_report
from sagas.selectors.sagas import unfinished_work_pins


def pending_migrations() -> int:
    executor = MigrationExecutor(connection)
    return len(executor.migration_plan(executor.loader.graph.leaf_nodes()))


def refuse_to_start_unless_ready(program: str) -> None:
    """What every serving command checks before it accepts work: the configuration (system checks, one message
    naming each bad setting and its fix), the schema, then the SAGA_ACTIONS_FILE registry loaded into it and the
    default contracts (registry.defaults: create_text_file) registered where the registry has no version of them."""
    if report := configuration_report(program):
        raise CommandError(report)
    # Read the token file now, once: requests reuse this verifier, so no request is the first to read it.
    token_verifier()
    if count := pending_migrations():
        raise CommandError(f"The database has {count} unapplied migration(s). Run `semantic-saga migrate` first.")
    if settings.SAGA_ACTIONS_FILE:
        try:
            registry_load_file(settings.SAGA_ACTIONS_FILE)
        except RegistryError as exc:  # e.g. a changed contract under an id+version the database already holds
            raise CommandError(f"SAGA_ACTIONS_FILE could not be loaded: {exc.message}") from None
    # After the file: a file that names create_text_file (another version, or inactive) decides about it.
    register_defaults(postpone=unfinished_work_pins)


# uvicorn's default listen backlog; the sockets listen from the banner on, so a client that read it is queued, not
# refused, while the application starts.
BACKLOG = 2048


def listening_sockets(host: str, port: int, program: str, *, backlog: int | None = None) -> list[socket.socket]:
    """The socket uvicorn would bind for `host` (one; IPv6 when the host is an IPv6 address, else IPv4, as uvicorn
    binds a name such as `localhost`), listening when `backlog` is given; else CommandError saying which port, why,
    and what to do."""
    refusal = f"{program} did not start: "
    # IPPROTO_TCP named, as getaddrinfo names it for uvicorn's own sockets: asyncio sets TCP_NODELAY only on a
    # connection whose socket says it is TCP, and without it a response written in two parts (headers, then body)
    # waits for the client's delayed ACK, 40 ms, on every request of a kept-alive connection.
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn: a port in TIME_WAIT is free
        sock.bind((host, port))
        if backlog is not None:
            sock.listen(backlog)
    except socket.gaierror as exc:
        sock.close()
        raise CommandError(
            f"{refusal}cannot listen on {host}: {exc.strerror}. Pass --host with an address or name of this "
            "machine (127.0.0.1 for this machine only, 0.0.0.0 for every interface)."
        ) from None
    except OSError as exc:
        sock.close()
        raise CommandError(refusal + _cannot_listen(host, port, exc)) from None
    return [sock]


def _cannot_listen(host: str, port: int, exc: OSError) -> str:
    if exc.errno == errno.EADDRINUSE:
        return (
            f"port {port} on {host} is already in use: another process is listening there. Pick a free port with "
            f"--port N, or stop that process (`ss -ltnp 'sport = :{port}'` or `lsof -i :{port}` shows which)."
        )
    if exc.errno == errno.EACCES:
        return (
            f"port {port} on {host} may not be opened by this user (ports below 1024 need privileges). Pick a port "
            "from 1024 up with --port N (the default is 8000)."
        )
    if exc.errno == errno.EADDRNOTAVAIL:
        return (
            f"{host} is not an address of this machine, so port {port} cannot be opened on it. Pass --host with one "
            "of its addresses (127.0.0.1 for this machine only, 0.0.0.0 for every interface)."
        )
    return f"port {port} on {host} cannot be opened: {exc.strerror or exc}. Pick another --port N or --host."


class Command(BaseCommand):
    help = (
        "Serve Semantic Saga (MCP, A2A, admin, /healthz) with uvicorn on one port. Loads SAGA_ACTIONS_FILE at start-up."
    )
    # The system checks run in handle, reported as one start-up message instead of Django's check listing.
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--host", default="127.0.0.1", help="Address to bind (default 127.0.0.1).")
        parser.add_argument("--port", type=int, default=8000, help="Port to bind (default 8000).")
        parser.add_argument("--log-level", default="info", help="uvicorn log level (default info).")
        # The command line that started us (the seed's semantic-saga-mcp / -a2a), for its start-up refusals.
        parser.add_argument("--program", default="semantic-saga serve", help=argparse.SUPPRESS)

    def handle(self, *args: Any, **options: Any) -> None:
        host, port, program = options["host"], options["port"], options["program"]
        declare_listening(host)  # before the token file is read: a short token is accepted on loopback only
        refuse_to_start_unless_ready(program)
        self._warn_of_short_tokens(host)
        if not is_loopback(host) and settings.SAGA_AUTH_MODE == "none" and not settings.SAGA_ALLOW_UNAUTHENTICATED:
            raise CommandError(
                f"Refusing to serve on {host} without authentication: anyone who can reach it would act as an "
                "admin. Set SAGA_AUTH_MODE=static or jwt (docs/identity.md), bind to 127.0.0.1, or set "
                "SAGA_ALLOW_UNAUTHENTICATED=true if a trusted proxy in front authenticates every request."
            )
        sockets = listening_sockets(host, port, program, backlog=BACKLOG)
        where = "loopback only" if is_loopback(host) else "reachable from the network"
        self.stdout.write(
            f"Semantic Saga on http://{host}:{port}/ ({where}): MCP at /mcp, A2A at /a2a, REST at /api/v1/, "
            "admin at /admin/, health at /healthz"
        )
        self.stdout.flush()  # before uvicorn's own lines, wherever stdout goes
        config = uvicorn.Config(
            "saga_project.asgi:application",
            host=host,
            port=port,
            lifespan="on",
            log_level=options["log_level"],
            backlog=BACKLOG,
        )
        server = uvicorn.Server(config)
        try:
            server.run(sockets=sockets)
        except KeyboardInterrupt:
            pass
        finally:
            for sock in sockets:
                sock.close()
        if not server.started:  # the application's start-up failed; uvicorn has logged why (as uvicorn.run exits)
            sys.exit(STARTUP_FAILURE)

    def _warn_of_short_tokens(self, host: str) -> None:
        verifier = token_verifier()
        short = verifier.short_tokens if isinstance(verifier, StaticTokenVerifier) else []
        if not short:
            return
        line = "!" * 100
        self.stderr.write(
            f"{line}\nWARNING: {len(short)} static token(s) shorter than {MIN_TOKEN_LENGTH} characters: "
            f"{'; '.join(short)}.\nAccepted only because this server listens on {host} (loopback) alone: any "
            'program on this machine can guess them. Replace them with long random tokens (python -c "import '
            'secrets; print(secrets.token_urlsafe(32))") before listening on any other address, where they are '
            f"refused.\n{line}"
        )
