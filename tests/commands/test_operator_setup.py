"""The operator verbs' lighter set-up (saga_project.operator_settings; saga_project.read_settings for the reads):
`pending`, `ledger`, `status`, `verify` and `preview-report` load the apps that hold the data they read and none of
the web surfaces, the MCP SDK or Celery; every other command, and the test process itself, load the whole project as
before. What is loaded is asserted, never how long
it takes (docs/benchmarks.md has the timings)."""

from __future__ import annotations

import logging
import subprocess
import sys
from pathlib import Path

import pytest
from celery import current_app
from django.apps import apps

from sagas.apps import SagasConfig
from sagas.coordinator.execution import nudges
from sagas.task_names import NODE_EXECUTE_TASK
from tests.commands.test_zero_setup import bare_env

# Modules an operator verb must not load: the console and the web stack, the MCP SDK, Celery, what only a
# configured setting or an action call needs, OpenTelemetry (nothing is recorded), the version's package metadata,
# the approval queue and the tool pins' description scan (nothing is judged), the undo plan and the contracts'
# template rules with JMESPath behind them (only `ledger --json` and the console show a plan), and what the
# system checks the operator settings settle would load (saga_project.cli._drop_settled_checks).
HEAVY = (
    "django.contrib.admin",
    "sagas.console",
    "rest_framework",
    "drf_spectacular",
    "mozilla_django_oidc",
    "mcp",
    "celery",
    "httpx",
    "jsonschema",
    "regopy",
    "sagas.protocols.mcp.server",
    "opentelemetry",
    "importlib.metadata",
    "sagas.selectors.approval_queue",
    "registry.tool_poisoning",
    "sagas.selectors.undo_plan",
    "registry.templating",
    "jmespath",
    "django.db.migrations.autodetector",
    "django.contrib.auth.views",
    # Django's error page (its logging's mail_admins handler resolves the reporter class, here
    # saga_project.operator_reporting's) and the template engine's tag libraries (no TEMPLATES here).
    "django.views.debug",
    "django.template.defaulttags",
    "django.template.defaultfilters",
    # One connection, no pool (PostgreSQL's; not imported on SQLite either way).
    "psycopg_pool",
)
# What a read verb's settings leave out (saga_project.read_settings), what only they would have loaded, and Django's
# views, which only auth and the checks of views a process serving no HTTP never shows would load.
READ_LEAVES_OUT = (
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "governance.models",
    "django.db.migrations",
    "django.views",
)
MODULES_MARK = "LOADED-MODULES:"
# Prints what the process loaded, once the command has run (whatever its exit status).
PROBE = (
    "import atexit, sys\n"
    f"atexit.register(lambda: sys.stderr.write({MODULES_MARK!r} + ' '.join(sorted(sys.modules)) + '\\n'))\n"
    "from saga_project.cli import main\n"
    "main(sys.argv[1:])\n"
)


def run_cli(command: list[str], env: dict[str, str], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """`command` (after the interpreter) in a process of its own, stdin closed, its output captured."""
    return subprocess.run(
        [sys.executable, *command],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=180,
        stdin=subprocess.DEVNULL,
    )


def loaded_by(args: list[str], tmp_path: Path) -> tuple[set[str], subprocess.CompletedProcess[str]]:
    done = run_cli(["-c", PROBE, *args], bare_env(tmp_path, SAGA_HOME=str(tmp_path / "home")), tmp_path)
    line = next(line for line in done.stderr.splitlines() if line.startswith(MODULES_MARK))
    return set(line.removeprefix(MODULES_MARK).split()), done


def heavy(modules: set[str]) -> list[str]:
    return sorted(m for m in modules if any(m == h or m.startswith(h + ".") for h in HEAVY))


@pytest.fixture
def migrated_home(tmp_path: Path) -> Path:
    """A home whose database exists: the first use (migrate) loads the whole project, once."""
    _, done = loaded_by(["status"], tmp_path)
    assert "setting up the database" in done.stderr, done.stderr
    return tmp_path


@pytest.mark.parametrize("verb", ["pending", "ledger", "status", "verify", "preview-report"])
def test_an_operator_verb_loads_only_the_data_apps(verb: str, migrated_home: Path):
    modules, done = loaded_by([verb], migrated_home)

    assert "Traceback" not in done.stderr, done.stderr
    assert "saga_project.read_settings" in modules
    assert heavy(modules) == []
    # A read sets up neither auth (its models, hashers, checks and the migration framework behind them) nor
    # governance, whose identity and policy checks still run (below).
    assert sorted(m for m in modules if m.startswith(READ_LEAVES_OUT)) == []


def test_a_read_verb_still_checks_governances_configuration(migrated_home: Path):
    """governance's app is not installed for a read (saga_project.read_settings); its checks are registered anyway."""
    env = bare_env(migrated_home, SAGA_HOME=str(migrated_home / "home"), SAGA_AUTH_MODE="static")
    env["SAGA_AUTH_STATIC_TOKENS"] = str(migrated_home / "no-such-tokens.json")
    done = run_cli(["-c", PROBE, "status"], env, migrated_home)

    assert done.returncode == 1, done.stderr
    assert "SAGA_AUTH_STATIC_TOKENS" in done.stderr and "Traceback" not in done.stderr


# What each verb's command loads beside HEAVY's and does not need: naming a session (sagas.selectors.proxy_sessions)
# reads none of its ledger's rows, a line per session none of them either, and the chain's verification is `verify`'s.
NOT_READ = {
    "pending": ("sagas.selectors.proxy_ledger", "sagas.selectors.journal_digests", "audit.chain"),
    "status": ("sagas.selectors.proxy_ledger", "sagas.selectors.journal_digests", "audit.chain"),
    "verify": ("sagas.selectors.proxy_ledger", "sagas.selectors.approvals", "sagas.selectors.undo_outcome"),
    "ledger": ("sagas.selectors.proxy_session_lines", "sagas.selectors.approvals", "audit.chain"),
}


@pytest.mark.parametrize("verb", sorted(NOT_READ))
def test_an_operator_verb_loads_the_reads_it_shows(verb: str, migrated_home: Path):
    modules, done = loaded_by([verb], migrated_home)

    assert "Traceback" not in done.stderr, done.stderr
    assert sorted(set(NOT_READ[verb]) & modules) == []


def test_a_decision_loads_the_operation_table_only_when_it_decides(migrated_home: Path):
    """`approve` without a terminal refuses before looking anything up: nothing heavy either."""
    modules, done = loaded_by(["approve", "abcd1234"], migrated_home)

    assert "only at an interactive terminal" in done.stderr
    assert heavy(modules) == [] and "sagas.operations.table" not in modules
    # A decision consults the kill switches (governance) through the operation table: the operator settings.
    assert "saga_project.operator_settings" in modules and "saga_project.read_settings" not in modules


def test_every_other_command_sets_up_the_whole_project(migrated_home: Path):
    modules, done = loaded_by(["check"], migrated_home)

    assert done.returncode == 0, done.stderr
    assert "saga_project.operator_settings" not in modules
    assert {"django.contrib.admin", "sagas.console", "rest_framework", "celery", "saga_project.celery"} <= modules


def test_the_full_set_up_registers_the_tasks_and_makes_the_project_app_current():
    assert type(apps.get_app_config("sagas")) is SagasConfig
    assert current_app.main == "saga_project"
    assert NODE_EXECUTE_TASK in current_app.tasks


def test_a_nudge_from_a_process_without_tasks_is_dropped_with_a_warning(caplog: pytest.LogCaptureFixture):
    with caplog.at_level(logging.WARNING, logger="sagas.nudges"):
        nudges._send("sagas.tasks.no_such_task", {"saga_id": "s", "node_id": "n"}, 0.0)

    assert "the recovery sweep will send it" in caplog.text


def test_an_operator_verb_ends_with_its_status_its_output_and_its_exit_handlers(migrated_home: Path):
    """A failing verb: the command's error and status 1, and the atexit handlers (the probe's list of modules is
    one) run."""
    modules, done = loaded_by(["ledger", "--session", "no-such-session"], migrated_home)

    assert done.returncode == 1
    assert done.stderr.startswith("CommandError: PROXY_SESSION_NOT_FOUND"), done.stderr
    assert "saga_project.read_settings" in modules


def test_an_operator_verb_connects_without_the_pool_but_the_configured_pool_is_checked(tmp_path: Path):
    """PostgreSQL's pool is left out of the operator settings' DATABASES; a pool configured wrong still stops the
    verb at start with saga.E042 (before any connection: no server needed)."""
    env = bare_env(
        tmp_path,
        DATABASE_URL="postgresql://postgres@127.0.0.1:5432/no-such-database",
        SECRET_KEY="k" * 60,
        SAGA_DB_POOL_MIN_SIZE="4",
        SAGA_DB_POOL_MAX_SIZE="2",
    )
    done = run_cli(["-m", "saga_project.cli", "status"], env, tmp_path)

    assert done.returncode == 1, done.stderr
    assert "saga.E042" in done.stderr and "SAGA_DB_POOL_MAX_SIZE" in done.stderr


def test_the_operator_settings_keep_the_configured_database_for_the_check():
    from django.conf import settings

    from saga_project import operator_settings

    assert settings.DATABASES["default"] == operator_settings.SAGA_CONFIGURED_DATABASE
    assert "pool" not in operator_settings.DATABASES["default"]["OPTIONS"]
    assert operator_settings.TEMPLATES == []


def test_the_operator_exception_reporter_is_djangos():
    from django.views.debug import ExceptionReporter as DjangoExceptionReporter

    from saga_project.operator_reporting import ExceptionReporter

    try:
        raise ValueError("boom")
    except ValueError:
        reporter = ExceptionReporter(None, *sys.exc_info(), is_email=True)

    assert type(reporter) is DjangoExceptionReporter
    assert "ValueError" in reporter.get_traceback_text()
