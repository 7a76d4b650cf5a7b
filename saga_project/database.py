"""How this process talks to PostgreSQL: Django's native psycopg connection pool, or PgBouncer transaction mode.

With the pool (the default), a Django connection's close() hands the psycopg connection back to the pool
(`putconn`) instead of ending the backend, so the places that close connections after each unit of work (an
embedded-executor job, a Celery task, an MCP/A2A ORM unit, a sweep, a lease renewal) cost a checkout, not a new
PostgreSQL backend. The pool discards a connection that comes back broken and opens a replacement; with
CONN_HEALTH_CHECKS it also checks each connection it hands out. Behind PgBouncer in transaction mode the server
connection changes between transactions, so prepared statements (psycopg prepares a statement after a few runs,
and the coordinator's statements, sagas.coordinator.sql, reuse their SQL text) and server-side binding are turned
off; the pool is off there by default (PgBouncer is the pool). docs/configuration.md lists the variables;
saga_project.checks refuses bad sizes.
"""

from __future__ import annotations

from typing import Any

from saga_project.environment import SettingsEnv

POOL_MIN_SIZE = 2
POOL_MAX_SIZE = 32
POOL_TIMEOUT_SECONDS = 10.0


def configure_postgresql(database: dict[str, Any], env: SettingsEnv) -> None:
    """Fill in `database` (a DATABASES entry for PostgreSQL) from the environment; keys already set win."""
    pgbouncer = env.bool("SAGA_PGBOUNCER", default=False)
    database.setdefault("CONN_MAX_AGE", env.int("CONN_MAX_AGE", default=0))
    database.setdefault("CONN_HEALTH_CHECKS", True)
    options: dict[str, Any] = database.setdefault("OPTIONS", {})
    if env.bool("SAGA_DB_POOL", default=not pgbouncer):
        options.setdefault(
            "pool",
            {
                "min_size": env.int("SAGA_DB_POOL_MIN_SIZE", default=POOL_MIN_SIZE),
                "max_size": env.int("SAGA_DB_POOL_MAX_SIZE", default=POOL_MAX_SIZE),
                "timeout": env.float("SAGA_DB_POOL_TIMEOUT_SECONDS", default=POOL_TIMEOUT_SECONDS),
            },
        )
    if pgbouncer:
        # A transaction-mode pooler gives each transaction whichever server connection is free: a statement
        # prepared on one is unknown on the next ("prepared statement _pg3_0 does not exist").
        options["server_side_binding"] = False
        options["prepare_threshold"] = None
        return
    # Server-side binding lets psycopg prepare the coordinator's repeated statements once per connection, so
    # PostgreSQL stops re-planning them on every step (the hot path's queries are few and always the same); with
    # the pool a connection, and so what it prepared, outlives the unit of work that used it.
    options.setdefault("server_side_binding", env.bool("SAGA_PG_SERVER_SIDE_BINDING", default=True))
    options.setdefault("prepare_threshold", env.int("SAGA_PG_PREPARE_THRESHOLD", default=2))


def pool_problem(database: dict[str, Any]) -> str | None:
    """What is wrong with the pool settings of `database`, or None (also when it has no pool)."""
    pool = database.get("OPTIONS", {}).get("pool")
    if not pool:
        return None
    if pool is True:
        pool = {}
    if database.get("CONN_MAX_AGE", 0) != 0:
        return (
            f"CONN_MAX_AGE is {database['CONN_MAX_AGE']!r}, but connections come from the pool, which keeps them "
            "open by itself; unset CONN_MAX_AGE (or set it to 0), or set SAGA_DB_POOL=off to keep connections "
            "with CONN_MAX_AGE instead"
        )
    min_size, max_size = pool.get("min_size", 4), pool.get("max_size", pool.get("min_size", 4))
    if min_size < 0:
        return f"SAGA_DB_POOL_MIN_SIZE is {min_size}; it must be 0 or more"
    if max_size < 1 or max_size < min_size:
        return f"SAGA_DB_POOL_MAX_SIZE is {max_size}; it must be at least 1 and no less than SAGA_DB_POOL_MIN_SIZE"
    if pool.get("timeout", 30.0) <= 0:
        return f"SAGA_DB_POOL_TIMEOUT_SECONDS is {pool['timeout']}; it must be more than 0 seconds"
    return None
