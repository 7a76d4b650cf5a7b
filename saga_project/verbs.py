"""What the `semantic-saga` command line does around Django's management commands: the hyphenated spellings a
person types (Sagaz's `preview-report`; `verify-audit` beside `verify_audit`), NO_COLOR honoured by Django's own
output too, and a closed pipe ending the command quietly (`semantic-saga ledger --json | head -1`).

Kept free of Django imports: saga_project.cli calls `run` before any app is loaded.

A closed pipe: the reader went away (head, grep -q, a pager quit). The command stops where it was, prints no
traceback, and exits with status 141 (128 + SIGPIPE), what a shell reports for a Unix tool killed by that signal, so
`set -o pipefail` scripts see the same status as with `yes | head -1`. Whatever the command had committed stays
committed: only its output is cut short.
"""

from __future__ import annotations

import os
import stat
import sys
from collections.abc import Callable, Sequence

PROGRAM = "semantic-saga"
# Hyphenated name -> the management command it runs. Sagaz's own verbs (verify, ledger, pending, approve, deny,
# status, packs) are commands of the same names; docs/proxy.md, "Coming from Sagaz", maps the rest.
ALIASES: dict[str, str] = {
    "preview-report": "preview_report",
    "verify-audit": "verify_audit",
    "export-audit": "export_audit",
    "recover-sagas": "recover_sagas",
    "kill-switch": "kill_switch",
    "import-mcp-tools": "import_mcp_tools",
    "load-actions": "load_actions",
}
CLOSED_PIPE_STATUS = 141
_HELP_FLAGS = ("help", "--help", "-h")


def rewrite(arguments: Sequence[str]) -> list[str]:
    """The arguments with an alias in the command's place (and in `help ALIAS`) replaced by its command."""
    out = list(arguments)
    if out:
        out[0] = ALIASES.get(out[0], out[0])
    if len(out) > 1 and out[0] == "help":
        out[1] = ALIASES.get(out[1], out[1])
    return out


def alias_help() -> str:
    """The aliases, as a section after Django's list of commands."""
    width = max(len(alias) for alias in ALIASES)
    lines = [f"    {alias.ljust(width)}  (= {command})" for alias, command in sorted(ALIASES.items())]
    return "\n".join(["", "[aliases]", *lines])


def run(execute: Callable[[list[str]], None], arguments: Sequence[str]) -> None:
    """`execute([PROGRAM, *arguments])` with aliases resolved, the aliases listed after the main help, and a closed
    pipe ending the command quietly."""
    argv = rewrite(arguments)
    honour_no_color()
    if argv in (["--version"], ["version"]):  # Django would print its own version
        with_closed_pipe_quiet(_print_version)
        return
    with_closed_pipe_quiet(lambda: _execute(execute, argv))


def _print_version() -> None:
    sys.stdout.write(version_line() + "\n")


def version_line() -> str:
    return f"{PROGRAM} {_installed('semantic-saga')} (Django {_installed('django')})"


def _installed(distribution: str) -> str:
    from importlib import metadata  # only `--version` reads it: some 5 ms that no other command should pay

    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return "unknown"


def honour_no_color() -> None:
    """Our commands paint only on a terminal and never with NO_COLOR (sagas.management.terminal); Django paints its
    own text (a CommandError, help's headings) on any terminal, unless DJANGO_COLORS says `nocolor`."""
    if os.environ.get("NO_COLOR"):
        os.environ["DJANGO_COLORS"] = "nocolor"


def _execute(execute: Callable[[list[str]], None], argv: list[str]) -> None:
    execute([PROGRAM, *argv])
    if not argv or (len(argv) == 1 and argv[0] in _HELP_FLAGS):
        sys.stdout.write(alias_help() + "\n")


def with_closed_pipe_quiet(run: Callable[[], None]) -> None:
    """Run; if standard output is a pipe whose reader has gone, exit CLOSED_PIPE_STATUS without a traceback."""
    try:
        try:
            run()
        finally:
            sys.stdout.flush()  # a closed pipe surfaces here, not as "Exception ignored" at interpreter exit
    except BrokenPipeError:
        if not _stdout_is_a_pipe():
            raise  # another pipe broke (a downstream's, a socket's): that is a real error
        # Python flushes stdout again on its way out: point it at /dev/null so that flush has nowhere to fail.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        sys.exit(CLOSED_PIPE_STATUS)


def _stdout_is_a_pipe() -> bool:
    try:
        mode = os.fstat(sys.stdout.fileno()).st_mode
    except (OSError, ValueError):
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)
