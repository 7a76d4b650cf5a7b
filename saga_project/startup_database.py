"""Is the configured database there at all? Asked once before a serving command (`serve`, `mcp`, the seed command
lines) migrates or accepts work, so an unreachable PostgreSQL or a SQLite file in a missing directory stops start-up
at once with one line naming the setting, the address and what to check, instead of a pool retrying for its timeout
and a traceback from deep inside Django.

The PostgreSQL probe is one plain psycopg connection (not the pool) with a short connect timeout; the SQLite one
looks for the file's directory (SQLite creates the file, never its directory).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

# libpq's connect_timeout for the start-up probe (seconds; libpq's minimum is 2). A server that does not answer in
# that time would not serve requests either.
STARTUP_CONNECT_TIMEOUT_SECONDS = 3
# DATABASES OPTIONS that are Django's or psycopg's, not libpq connection parameters.
_NOT_LIBPQ = frozenset(
    {"pool", "server_side_binding", "prepare_threshold", "isolation_level", "assume_role", "cursor_factory", "context"}
)


def database_problem(source: str = "DATABASE_URL") -> str | None:
    """None when the default database can be opened; else one line saying which database (set by `source`: a flag
    or variable name), what went wrong and what to do. Call after django.setup()."""
    from django.conf import settings

    database: dict[str, Any] = settings.DATABASES["default"]
    engine = database.get("ENGINE", "")
    if "postgresql" in engine:
        return _postgresql_problem(database, source)
    if "sqlite3" in engine:
        return _sqlite_problem(str(database.get("NAME") or ""), source)
    return None


def _postgresql_problem(database: dict[str, Any], source: str) -> str | None:
    import psycopg

    parameters: dict[str, Any] = {
        "dbname": database.get("NAME"),
        "user": database.get("USER"),
        "password": database.get("PASSWORD"),
        "host": database.get("HOST"),
        "port": database.get("PORT"),
    }
    options = database.get("OPTIONS", {})
    parameters.update({k: v for k, v in options.items() if k not in _NOT_LIBPQ and isinstance(v, str | int)})
    parameters = {k: v for k, v in parameters.items() if v not in (None, "")}
    try:
        connect: Any = psycopg.connect  # keyword parameters are libpq's, which its signature does not list
        connect(**parameters, connect_timeout=STARTUP_CONNECT_TIMEOUT_SECONDS).close()
    except psycopg.Error as exc:
        where = f"{parameters.get('host', 'the local socket')}:{parameters.get('port', 5432)}"
        reason = " ".join(str(exc).split()) or type(exc).__name__
        end = "" if reason.endswith((".", "?")) else "."
        return (
            f"cannot connect to PostgreSQL at {where} (database {parameters.get('dbname', '?')!r}, from {source}): "
            f"{reason}{end} Check that PostgreSQL is running and reachable from here, and the host, port, user, "
            f"password and database name in {source}."
        )
    return None


def _sqlite_problem(name: str, source: str) -> str | None:
    if not name or name == ":memory:" or name.startswith("file:"):
        return None
    directory = Path(name).absolute().parent
    if directory.is_dir():
        return None
    return (
        f"the SQLite database {name} (from {source}) cannot be created: its directory {directory} does not exist. "
        f"Create it (mkdir -p {directory}) or point {source} at a file in an existing directory."
    )
