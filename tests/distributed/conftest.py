"""Fixtures for distributed execution: real Redis, real `celery worker` processes, the real test database.

Celery runs need PostgreSQL (row locks, SKIP LOCKED, one database shared by processes): those tests run in the
PostgreSQL pass of `make test` and are skipped, with that reason, in the SQLite pass. Tests parametrized over
both executors run their embedded half on both databases.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.db import connection

from saga_project.celery import app as celery_app
from tests.distributed.workers import CeleryWorker

SYSTEM_REDIS = "redis://127.0.0.1:6379"


def point_celery_at(broker_url: str) -> None:
    """Make this process publish to `broker_url` (settings were read once; the producer pool is cached)."""
    celery_app.conf.broker_url = broker_url
    celery_app._pool = None
    celery_app.amqp._producer_pool = None


def require_postgresql() -> None:
    if connection.vendor != "postgresql":
        pytest.skip("Celery workers share the database across processes: runs in the PostgreSQL pass")


@pytest.fixture(autouse=True)
def _committed_db(transactional_db: None) -> None:
    """Workers are other processes: every row must be committed for them to see it."""


@pytest.fixture(scope="module")
def broker_url() -> str:
    # One Redis database per xdist worker process, so parallel test processes never share a queue.
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    index = 1 + int("".join(ch for ch in worker if ch.isdigit()) or 0)
    return f"{SYSTEM_REDIS}/{index}"


@pytest.fixture(scope="module")
def celery_worker(
    broker_url: str, django_db_setup: None, django_db_blocker: object, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[CeleryWorker | None]:
    """One worker process for the module (None on SQLite, where Celery tests skip)."""
    if connection.vendor != "postgresql":
        yield None
        return
    import redis

    redis.Redis.from_url(broker_url).flushdb()
    worker = CeleryWorker(broker_url, tmp_path_factory.mktemp("celery")).start()
    try:
        yield worker
    finally:
        worker.stop()


@pytest.fixture(params=["embedded", "celery"])
def executor_mode(
    request: pytest.FixtureRequest, settings: object, celery_worker: CeleryWorker | None, broker_url: str
) -> Iterator[str]:
    """Run the test once on the embedded executor and once on real Celery workers."""
    if request.param == "celery":
        require_postgresql()
        assert celery_worker is not None and celery_worker.proc is not None and celery_worker.proc.poll() is None
        settings.CELERY_BROKER_URL = broker_url  # type: ignore[attr-defined]
        point_celery_at(broker_url)
    yield request.param


@pytest.fixture
def log_dir(tmp_path: Path) -> Path:
    return tmp_path
