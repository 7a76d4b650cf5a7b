"""The `semantic-saga` console script: Django management with our settings.

A value settings.py refuses (ImproperlyConfigured) ends the command with its one-line message on stderr and exit
status 1, not a traceback: it is the operator's to fix, not a bug. `--traceback` shows the traceback anyway.

Two things happen before the command runs:
- The operator verbs (OPERATOR_VERBS) set Django up with saga_project.operator_settings, the apps that hold the
  data and nothing of the web surfaces, so a person typing `semantic-saga pending` in a loop waits for a few rows,
  not for the console, the MCP SDK and DRF to load (docs/benchmarks.md, "The command line"); those that only read
  (READ_VERBS) with saga_project.read_settings, less the apps a read never touches (auth, contenttypes, governance).
- With no DATABASE_URL configured, the per-user home's database (saga_project.home) is created and migrated on
  first use, under a lock, and a first `serve` collects the console's static files there.

An operator verb then runs its command directly (`execute`), not through Django's search of every app's commands,
and starts with the garbage collector paused until its modules are loaded: such a verb should answer in 0.2 s.
"""

from __future__ import annotations

import atexit
import gc
import importlib
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

# saga_project.home is imported where it is used, after main() has paused the garbage collector: it brings in Django
# (its exceptions, and django/__init__'s own imports), the first of the modules an operator verb loads.
from saga_project import verbs

FULL_SETTINGS = "saga_project.settings"
OPERATOR_SETTINGS = "saga_project.operator_settings"
READ_SETTINGS = "saga_project.read_settings"
# Commands (and their hyphenated aliases) that read rows, set up with READ_SETTINGS; and those that decide a held
# call (through the operation table, which consults the kill switches: governance), with OPERATOR_SETTINGS.
READ_VERBS = frozenset({"pending", "ledger", "status", "verify", "preview_report", "preview-report"})
DECISION_VERBS = frozenset({"approve", "deny"})
OPERATOR_VERBS = READ_VERBS | DECISION_VERBS
# The app whose management commands they are.
OPERATOR_VERBS_APP = "sagas"
# Commands that serve: with a database configured, it is probed before they start (saga_project.startup_database).
SERVING_COMMANDS = frozenset({"serve", "mcp"})
# Commands that must not migrate the home's database first: they are about migrations, or need no database.
NO_FIRST_USE = frozenset(
    {
        "",
        "help",
        "--help",
        "-h",
        "version",
        "--version",
        "check",
        "migrate",
        "makemigrations",
        "showmigrations",
        "sqlmigrate",
        "squashmigrations",
    }
)


def main(argv: list[str] | None = None) -> None:
    arguments = sys.argv[1:] if argv is None else argv
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "saga_project.settings")
    if arguments and arguments[0] in OPERATOR_VERBS:
        # No garbage collection while Django, the apps and the verb's modules load: they leave some 70,000 objects
        # for the collector to track, all of which stay, and its collections on the way (a full one among them)
        # would walk them to free next to nothing: some 20 ms, a tenth of the command. Collection resumes before
        # the verb runs (_collect_again).
        gc.disable()
    exit_on_misconfiguration(
        "semantic-saga",
        lambda: verbs.run(execute, arguments),  # aliases, a closed pipe: saga_project.verbs
        traceback="--traceback" in arguments,
        set_up=lambda: set_up_for(arguments[0] if arguments else ""),
    )


def operator_settings_for(command: str) -> str:
    """The settings module an operator verb is set up with."""
    return READ_SETTINGS if command in READ_VERBS else OPERATOR_SETTINGS


def execute(argv: list[str]) -> None:
    """Django's execute_from_command_line(argv), once set_up_for has set Django up. An operator verb set up with
    its operator settings runs its command directly: Django would set itself up a second time and list every app's
    commands to find the one these settings can only mean (sagas', tests/commands/test_operator_setup.py), and the
    command parses its arguments, prints its help and errors and exits as it does when Django finds it. Shell
    completion (DJANGO_AUTO_COMPLETE) is Django's own, so it keeps Django's way."""
    from django.conf import settings

    command = argv[1] if len(argv) > 1 else ""
    if (
        command in OPERATOR_VERBS
        and settings.SETTINGS_MODULE in (OPERATOR_SETTINGS, READ_SETTINGS)
        and "DJANGO_AUTO_COMPLETE" not in os.environ
    ):
        from django.core.management import load_command_class

        verb = load_command_class(OPERATOR_VERBS_APP, command)
        _collect_again()
        verb.run_from_argv(argv)
        return
    from django.core.management import execute_from_command_line

    _collect_again()
    execute_from_command_line(argv)


def _collect_again() -> None:
    """Resume the garbage collection main() paused, with what is loaded so far (modules, classes, settings: never
    garbage) moved out of its sight, so the command's own collections walk the command's objects only."""
    if not gc.isenabled():
        gc.freeze()
        gc.enable()


def exit_on_misconfiguration(
    program: str, run: Callable[[], None], *, traceback: bool = False, set_up: Callable[[], None] | None = None
) -> None:
    """Set Django up (`set_up`, else django.setup()), then `run`; an ImproperlyConfigured from either exits with one
    line naming the setting."""
    import django
    from django.core.exceptions import ImproperlyConfigured

    try:
        (set_up or django.setup)()  # loads settings.py and the apps: where most configuration errors surface
        run()
    except ImproperlyConfigured as exc:
        if traceback:
            raise
        sys.exit(f"{program}: configuration error: {exc}")


def set_up_for(command: str) -> None:
    """django.setup() with the settings `command` needs; the home's database made ready first when it is used."""
    import django
    from django.apps import apps
    from django.conf import settings

    from saga_project import home

    behind = operator = False
    if os.environ["DJANGO_SETTINGS_MODULE"] == FULL_SETTINGS and not apps.ready:
        full: Any = importlib.import_module(FULL_SETTINGS)
        behind = full.SAGA_USES_HOME and home.unapplied_migrations(Path(full.DATABASES["default"]["NAME"]))
        # A database still to be migrated is migrated with every app's migrations: the full set-up, this once.
        if command in OPERATOR_VERBS and not behind:
            os.environ["DJANGO_SETTINGS_MODULE"] = operator_settings_for(command)
            operator = True
    django.setup()
    if operator:
        _drop_settled_checks()
        atexit.register(_leave_quickly)
    if getattr(settings, "SAGA_USES_HOME", False) and command not in NO_FIRST_USE:
        _make_home_ready(settings, command, behind=behind)
    elif command in SERVING_COMMANDS:
        from saga_project.startup_database import database_problem

        # An unreachable PostgreSQL, or a SQLite file in a missing directory: one line now, not a pool retrying
        # for its timeout and then a traceback.
        if problem := database_problem("DATABASE_URL"):
            sys.exit(f"semantic-saga {command} did not start: {problem}")


def prepare_home(command: str) -> None:
    """What set_up_for does for the per-user home, for a command set up with plain django.setup() (the seed command
    lines): without DATABASE_URL, the home and its database are created and migrated on first use (and `serve`
    collects the console's static files there), under the home's lock. Nothing when a database is configured."""
    from django.conf import settings

    from saga_project import home

    if getattr(settings, "SAGA_USES_HOME", False):
        database = Path(settings.DATABASES["default"]["NAME"])
        _make_home_ready(settings, command, behind=home.unapplied_migrations(database))


def _drop_settled_checks() -> None:
    """Unregister the system checks whose answer the operator settings settle, each of which loads a module tree to
    give it: whether `makemigrations` and `migrate` share an autodetector (Django's own two commands, as no operator
    app overrides either: the migration framework, for two commands these verbs never run); the error views of the
    URL conf and the CSRF failure view, which these settings leave to Django's defaults (the URL conf is the
    operator settings module itself and names none; no setting of ours names a CSRF view): django.views and its
    generic views, to look at five function signatures in a process that serves no HTTP; and where
    LoginRequiredMiddleware stands in MIDDLEWARE (auth's middleware, views and forms, to search an empty list;
    auth's own check, registered only where auth is installed: not in READ_SETTINGS). Every other check still runs
    before the verb (tests/commands/test_operator_dispatch.py: the ones dropped find nothing in these settings)."""
    from django.apps import apps
    from django.core.checks.commands import migrate_and_makemigrations_autodetector
    from django.core.checks.registry import registry
    from django.core.checks.security.csrf import check_csrf_failure_view
    from django.core.checks.urls import check_custom_error_handlers

    registry.registered_checks -= {
        migrate_and_makemigrations_autodetector,
        check_custom_error_handlers,
        check_csrf_failure_view,
    }
    if apps.is_installed("django.contrib.auth"):
        from django.contrib.auth.checks import check_middleware

        registry.registered_checks -= {check_middleware}


def _leave_quickly() -> None:
    """At an operator verb's exit: close the database connections, then spare the interpreter its last garbage
    collection, a walk over every object of some 700 modules (60-120 ms, a fifth of the command) that would find
    nothing left to finalize. Runs as an atexit handler: after the command, whatever its exit status."""
    from django.db import connections

    connections.close_all()
    gc.freeze()


def _make_home_ready(settings: Any, command: str, *, behind: bool) -> None:
    """Create and migrate the home's database if it is new or older than the code; for `serve`, collect the
    console's static files there once. Under the home's lock: a second command started meanwhile waits, then
    finds the work done."""
    from django.core.management import call_command

    from saga_project import home

    database = Path(settings.DATABASES["default"]["NAME"])
    static = Path(settings.STATIC_ROOT)
    if not behind and (command != "serve" or static.is_dir()):
        return
    _collect_again()  # a migration makes and drops many objects: collect them
    with home.set_up_lock(settings.SAGA_HOME):
        if home.unapplied_migrations(database):
            sys.stderr.write(f"semantic-saga: setting up the database {database} (first use, or a new version)\n")
            call_command("migrate", interactive=False, verbosity=0)
        if command == "serve" and not static.is_dir():
            call_command("collectstatic", interactive=False, verbosity=0)


if __name__ == "__main__":
    main()
