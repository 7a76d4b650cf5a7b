"""An operator verb runs its command directly (saga_project.cli.execute), not through Django's
execute_from_command_line: what it prints, on which stream, and its exit status are what Django's own dispatch
gives for the same arguments; the commands it stands for are the ones Django would find; the system checks it drops
can find nothing in its set-up; and garbage collection, paused while the modules load, is back on when the
command runs."""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

import pytest
from django.contrib.auth.checks import check_middleware
from django.core.checks.commands import migrate_and_makemigrations_autodetector
from django.core.checks.security.csrf import check_csrf_failure_view
from django.core.checks.urls import check_custom_error_handlers
from django.core.management import get_commands
from django.test import override_settings

from saga_project.cli import OPERATOR_SETTINGS, OPERATOR_VERBS, OPERATOR_VERBS_APP, operator_settings_for
from saga_project.verbs import ALIASES
from tests.commands.test_zero_setup import TIMEOUT_SECONDS, bare_env, semantic_saga

# Django's own dispatch of the same command line, in the same operator set-up (settings module and database).
DJANGO_DISPATCH = (
    "import sys\n"
    "from django.core.management import execute_from_command_line\n"
    "execute_from_command_line(['semantic-saga', *sys.argv[1:]])\n"
)
GC_MARK = "GC-ENABLED-IN-COMMAND:"
# Says whether garbage collection is on when the command itself starts running.
GC_PROBE = (
    "import gc, sys\n"
    "from django.core.management.base import BaseCommand\n"
    "run = BaseCommand.execute\n"
    "def execute(self, *args, **options):\n"
    f"    sys.stderr.write({GC_MARK!r} + str(gc.isenabled()) + '\\n')\n"
    "    return run(self, *args, **options)\n"
    "BaseCommand.execute = execute\n"
    "from saga_project.cli import main\n"
    "main(sys.argv[1:])\n"
)


@pytest.fixture(scope="module")
def home_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """A per-user home whose database exists (the first use migrates it with the full set-up, once)."""
    tmp_path = tmp_path_factory.mktemp("operator-dispatch")
    env = bare_env(tmp_path, SAGA_HOME=str(tmp_path / "home"), NO_COLOR="1")
    first = semantic_saga("status", env=env, cwd=tmp_path)
    assert "setting up the database" in first.stderr, first.stderr
    return env


def _python(code: str, args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_SECONDS,
        stdin=subprocess.DEVNULL,
    )


@pytest.mark.parametrize(
    "args",
    [
        ["status"],
        ["status", "--help"],
        ["status", "--bogus"],
        ["status", "--limit", "many"],
        ["pending", "--json"],
        ["ledger", "--session", "nope"],
        ["verify", "one", "two"],
        ["preview-report", "--help"],
        ["approve"],
        ["deny", "abcd1234"],
    ],
)
def test_an_operator_verb_answers_as_djangos_own_dispatch_does(args: list[str], home_env: dict[str, str]):
    # when: the console script, and Django's execute_from_command_line in the same operator set-up
    direct = semantic_saga(*args, env=home_env, cwd=Path(home_env["SAGA_HOME"]))
    command = [ALIASES.get(args[0], args[0]), *args[1:]]
    settings = operator_settings_for(command[0])
    djangos = _python(DJANGO_DISPATCH, command, {**home_env, "DJANGO_SETTINGS_MODULE": settings})
    # then: the same words on the same streams, and the same exit status
    assert (direct.returncode, direct.stdout, direct.stderr) == (djangos.returncode, djangos.stdout, djangos.stderr)
    assert "Traceback" not in direct.stderr


def test_garbage_collection_is_on_when_the_command_runs(home_env: dict[str, str]):
    done = _python(GC_PROBE, ["status"], home_env)

    assert done.returncode == 0, done.stderr
    assert f"{GC_MARK}True" in done.stderr.splitlines()


def test_the_commands_an_operator_verb_runs_are_the_ones_django_finds():
    """The full set-up's apps include every app of the operator settings, in the same order: what Django finds here
    for a verb (the first app listing the command wins) it finds there."""
    found = get_commands()

    for verb in OPERATOR_VERBS:
        assert found[ALIASES.get(verb, verb)] == OPERATOR_VERBS_APP, verb
    # Django's own two, so the commands check would compare Django's autodetector with itself
    assert found["makemigrations"] == found["migrate"] == "django.core"


def test_the_checks_an_operator_verb_drops_find_nothing_in_its_set_up():
    operator = importlib.import_module(OPERATOR_SETTINGS)

    with override_settings(MIDDLEWARE=operator.MIDDLEWARE, ROOT_URLCONF=operator.ROOT_URLCONF):
        assert check_middleware(None) == []
        assert check_custom_error_handlers(None) == []
    assert check_csrf_failure_view(None) == []
    assert migrate_and_makemigrations_autodetector() == []
