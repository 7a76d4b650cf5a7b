"""The chaos suite's configuration checks, its private database and the actions it registers there."""

from __future__ import annotations

import os
import shutil
import sys
from typing import Any
from urllib.parse import urlsplit

from bench.common import ROOT, SECRET_KEY

LOOPBACK = {"127.0.0.1", "localhost", "::1"}
TIMEOUT_SECONDS = 2  # bench.chaos_faults.ACTION_TIMEOUT_SECONDS; the sink's delay is longer

# action id -> (sink path, forward max_attempts, idempotent, failure_mode, approval_required)
ACTIONS: dict[str, tuple[str, int, bool, str, bool]] = {
    "chaos_step": ("/effect", 4, True, "rollback", False),
    "chaos_gated": ("/effect", 4, True, "rollback", True),
    "chaos_once": ("/once", 1, False, "pause", False),
    "chaos_fail": ("/fail", 2, True, "rollback", False),
}
COMPENSATION_ATTEMPTS = 5


def check_config(database_url: str, sagas: int, duration: float, workers: int, replicas: int) -> str:
    """Every mistake found before anything starts, with what to do instead; returns the database name."""
    problems: list[str] = []
    parts = urlsplit(database_url)
    name = parts.path.lstrip("/")
    if parts.scheme not in ("postgres", "postgresql"):
        problems.append(f"--database-url must be a postgresql:// URL (got {parts.scheme or 'no scheme'!r})")
    if (parts.hostname or "") not in LOOPBACK:
        problems.append(f"--database-url must point at this machine (127.0.0.1), not {parts.hostname!r}")
    if not name.startswith("chaos"):
        problems.append(f"the database name must start with 'chaos' (it is dropped and created again), got {name!r}")
    if parts.query:
        problems.append("--database-url takes no query string (the suite tags each process's sessions itself)")
    if sagas < 1 or duration <= 0 or workers < 1 or replicas < 1:
        problems.append("--sagas, --duration, --workers and --replicas must be positive")
    if duration > 6 * 3600 or sagas > 100_000:
        problems.append("--duration is bounded at 6 hours and --sagas at 100000")
    if not shutil.which("redis-server"):
        problems.append("redis-server is not installed (apt-get install redis-server)")
    if problems:
        raise SystemExit("chaos: configuration error:\n  - " + "\n  - ".join(problems))
    return name


def recreate_database(database_url: str, name: str) -> None:
    import psycopg

    admin = database_url.rsplit("/", 1)[0] + "/postgres"
    try:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            conn.execute(f'CREATE DATABASE "{name}"')
    except psycopg.OperationalError as exc:
        raise SystemExit(f"chaos: cannot reach PostgreSQL at {admin}: {exc}".strip()) from None


def product_env(database_url: str, work: str) -> dict[str, str]:
    return {
        **os.environ,
        "DATABASE_URL": database_url,
        "DJANGO_SETTINGS_MODULE": "saga_project.settings",
        "SECRET_KEY": SECRET_KEY,
        "DEBUG": "false",
        "LOG_LEVEL": "WARNING",
        "SAGA_ACTIONS_FILE": "",
        "SAGA_FILE_ROOT": os.path.join(work, "files"),
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep),
    }


def setup_django(database_url: str, broker_url: str, work: str, lease_seconds: int) -> None:
    """This process on the chaos database (its sessions tagged chaos-harness: the injector spares them)."""
    os.environ.update(product_env(f"{database_url}?application_name=chaos-harness", work))
    os.environ.update({"CELERY_BROKER_URL": broker_url, "SAGA_LEASE_SECONDS": str(lease_seconds)})
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0, interactive=False)


def register_actions(sink_url: str) -> None:
    """Register the chaos actions against the sink (the checks read each step's attempts from its snapshot)."""
    from registry.services import action_register

    for action_id in ACTIONS:
        action_register(contract(action_id, sink_url))


def contract(action_id: str, sink_url: str) -> dict[str, Any]:
    path, attempts, idempotent, failure_mode, approval = ACTIONS[action_id]
    retry = {"initial_backoff_seconds": 0.05, "backoff_multiplier": 2, "max_backoff_seconds": 0.5, "jitter": 0.1}
    return {
        "id": action_id,
        "version": "1.0.0",
        "kind": "http",
        "semantic": {
            "domain": "chaos",
            "operation": "apply",
            "resource": action_id,
            "risk": "low",
            "reversibility": "compensable",
        },
        "input_schema": {"type": "object"},
        "execution_policy": {
            "forward": {"max_attempts": attempts, **retry},
            "compensation": {"max_attempts": COMPENSATION_ATTEMPTS, **retry},
            "failure_mode": failure_mode,
            "approval_required": approval,
            "idempotent": idempotent,
        },
        "forward": {
            "url": f"{sink_url}{path}",
            "method": "POST",
            "body": {"input": "${input}", "step": "${step.id}"},
            "timeout_seconds": TIMEOUT_SECONDS,
        },
        "compensation": {
            "url": f"{sink_url}{path}/undo",
            "method": "POST",
            "body": {"step": "${step.id}"},
            "timeout_seconds": TIMEOUT_SECONDS,
        },
    }
