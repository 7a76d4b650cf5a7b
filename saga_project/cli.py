"""The `semantic-saga` console script: Django management with our settings.

A value settings.py refuses (ImproperlyConfigured) ends the command with its one-line message on stderr and exit
status 1, not a traceback: it is the operator's to fix, not a bug. `--traceback` shows the traceback anyway.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable

from saga_project import verbs


def main(argv: list[str] | None = None) -> None:
    arguments = sys.argv[1:] if argv is None else argv
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "saga_project.settings")
    from django.core.management import execute_from_command_line

    exit_on_misconfiguration(
        "semantic-saga",
        lambda: verbs.run(execute_from_command_line, arguments),  # aliases, a closed pipe: saga_project.verbs
        traceback="--traceback" in arguments,
    )


def exit_on_misconfiguration(program: str, run: Callable[[], None], *, traceback: bool = False) -> None:
    """Set Django up, then `run`; an ImproperlyConfigured from either exits with one line naming the setting."""
    import django
    from django.core.exceptions import ImproperlyConfigured

    try:
        django.setup()  # loads settings.py and every app: where most configuration errors surface
        run()
    except ImproperlyConfigured as exc:
        if traceback:
            raise
        sys.exit(f"{program}: configuration error: {exc}")


if __name__ == "__main__":
    main()
