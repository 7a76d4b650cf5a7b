"""Shared by the audit tests: `verify_audit` as an operator runs it."""

from __future__ import annotations

import io

from django.core.management import call_command


def run_verify_audit(*args: str) -> tuple[int, str]:
    """(exit code, stdout) of `semantic-saga verify_audit ARGS`."""
    out = io.StringIO()
    try:
        call_command("verify_audit", *args, stdout=out)
    except SystemExit as exit_:
        return int(exit_.code or 0), out.getvalue()
    return 0, out.getvalue()
