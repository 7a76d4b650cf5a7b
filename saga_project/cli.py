"""The `semantic-saga` console script: Django management with our settings."""

from __future__ import annotations

import os
import sys


def main(argv: list[str] | None = None) -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "saga_project.settings")
    from django.core.management import execute_from_command_line

    execute_from_command_line(["semantic-saga", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    main()
