"""PostgreSQL connection settings (saga_project.database): the pool by default, sized from the environment, off
with PgBouncer transaction pooling together with prepared statements; bad sizes are refused by saga.E042."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from django.core.checks import run_checks

from saga_project import checks
from saga_project.database import configure_postgresql, pool_problem
from saga_project.environment import SettingsEnv
from sagas.coordinator.sql import pipeline as write_behind


def configured(monkeypatch: pytest.MonkeyPatch, **variables: str) -> dict[str, Any]:
    for name in ("SAGA_PGBOUNCER", "SAGA_DB_POOL", "CONN_MAX_AGE", "SAGA_PG_PREPARE_THRESHOLD"):
        monkeypatch.delenv(name, raising=False)
    for name, value in variables.items():
        monkeypatch.setenv(name, value)
    database: dict[str, Any] = {"ENGINE": "django.db.backends.postgresql", "NAME": "saga"}
    configure_postgresql(database, SettingsEnv())
    return database


def test_the_pool_is_on_by_default_with_prepared_statements(monkeypatch: pytest.MonkeyPatch):
    database = configured(monkeypatch)
    assert database["OPTIONS"]["pool"] == {"min_size": 2, "max_size": 32, "timeout": 10.0}
    assert database["CONN_MAX_AGE"] == 0 and database["CONN_HEALTH_CHECKS"] is True
    assert database["OPTIONS"]["prepare_threshold"] == 2 and database["OPTIONS"]["server_side_binding"] is True
    assert pool_problem(database) is None


def test_the_pool_is_sized_from_the_environment(monkeypatch: pytest.MonkeyPatch):
    database = configured(
        monkeypatch, SAGA_DB_POOL_MIN_SIZE="1", SAGA_DB_POOL_MAX_SIZE="40", SAGA_DB_POOL_TIMEOUT_SECONDS="2.5"
    )
    assert database["OPTIONS"]["pool"] == {"min_size": 1, "max_size": 40, "timeout": 2.5}


def test_pgbouncer_turns_the_pool_and_prepared_statements_off(monkeypatch: pytest.MonkeyPatch):
    database = configured(monkeypatch, SAGA_PGBOUNCER="true", SAGA_PG_PREPARE_THRESHOLD="2")
    assert "pool" not in database["OPTIONS"]
    assert database["OPTIONS"]["prepare_threshold"] is None and database["OPTIONS"]["server_side_binding"] is False
    # a client-side pool in front of PgBouncer is still allowed, still without prepared statements
    database = configured(monkeypatch, SAGA_PGBOUNCER="true", SAGA_DB_POOL="true")
    assert database["OPTIONS"]["pool"] and database["OPTIONS"]["prepare_threshold"] is None


def test_the_pool_can_be_turned_off_for_conn_max_age(monkeypatch: pytest.MonkeyPatch):
    database = configured(monkeypatch, SAGA_DB_POOL="off", CONN_MAX_AGE="60")
    assert "pool" not in database["OPTIONS"] and database["CONN_MAX_AGE"] == 60
    assert pool_problem(database) is None


@pytest.mark.parametrize(
    ("variables", "named"),
    [
        ({"SAGA_DB_POOL_MIN_SIZE": "-1"}, "SAGA_DB_POOL_MIN_SIZE"),
        ({"SAGA_DB_POOL_MIN_SIZE": "5", "SAGA_DB_POOL_MAX_SIZE": "3"}, "SAGA_DB_POOL_MAX_SIZE"),
        ({"SAGA_DB_POOL_MIN_SIZE": "0", "SAGA_DB_POOL_MAX_SIZE": "0"}, "SAGA_DB_POOL_MAX_SIZE"),
        ({"SAGA_DB_POOL_TIMEOUT_SECONDS": "0"}, "SAGA_DB_POOL_TIMEOUT_SECONDS"),
        ({"CONN_MAX_AGE": "60"}, "CONN_MAX_AGE"),
    ],
    ids=str,
)
def test_bad_pool_settings_are_named(monkeypatch: pytest.MonkeyPatch, variables: dict[str, str], named: str):
    problem = pool_problem(configured(monkeypatch, **variables))
    assert problem is not None and problem.startswith(named)


def test_a_bad_pool_is_a_startup_check_error(monkeypatch: pytest.MonkeyPatch):
    assert "saga.E042" not in [m.id for m in run_checks()]  # this test run's own database is fine
    # the check reads settings.DATABASES; the live one is left alone (its connections are in use)
    bad = {"default": configured(monkeypatch, SAGA_DB_POOL_MAX_SIZE="0")}
    monkeypatch.setattr(checks, "settings", SimpleNamespace(DATABASES=bad))
    messages = checks.database_pool_check()
    assert [m.id for m in messages] == ["saga.E042"] and "SAGA_DB_POOL_MAX_SIZE" in messages[0].msg


def test_the_check_asks_psycopg_what_the_coordinators_writes_ask():
    assert checks.pipeline_supported() is write_behind.pipeline_supported()


@pytest.mark.parametrize("pipeline", [True, False])
def test_pipelining_without_libpq_support_is_a_startup_check_error(monkeypatch: pytest.MonkeyPatch, pipeline: bool):
    assert "saga.E043" not in [m.id for m in run_checks()]  # this machine's psycopg has pipeline mode
    postgres = {"default": {"ENGINE": "django.db.backends.postgresql"}}
    monkeypatch.setattr(checks, "settings", SimpleNamespace(DATABASES=postgres, SAGA_PG_PIPELINE=pipeline))
    # an old system libpq, which we cannot install (the check asks psycopg when PostgreSQL is configured)
    monkeypatch.setattr(checks, "pipeline_supported", lambda: False)
    messages = checks.pipeline_check()
    if pipeline:
        assert [m.id for m in messages] == ["saga.E043"] and "SAGA_PG_PIPELINE=false" in (messages[0].hint or "")
    else:
        assert messages == []  # turned off: writes go one by one, nothing to check
