"""Sagaz's habits at our command line: `preview-report` (an alias of preview_report) with `last`, a short id, a
whole id or Sagaz's `--session`; `help` listing the aliases; `--version`; colour on a pipe only with FORCE_COLOR and
never with NO_COLOR; and a reader that goes away (`ledger --json | head -1`) ending any command quietly with status
141, never a traceback."""

from __future__ import annotations

import os
import subprocess

import pytest

from saga_project.verbs import ALIASES, CLOSED_PIPE_STATUS, rewrite
from tests.proxy.preview_session import dry_proxy_session
from tests.proxy.sagaz_user import ROOT, SEMANTIC_SAGA, WAIT_SECONDS, cli, env, held_call, live_session

pytestmark = pytest.mark.django_db(transaction=True)
HEADLINE = "Nothing reached the world. 2 read(s) executed, 6 call(s) recorded dry"


def test_preview_report_names_the_session_as_sagaz_users_do():
    # given a preview session, the newest
    session = dry_proxy_session()
    whole = cli("preview_report", str(session.id))
    assert whole.returncode == 0, whole.stderr
    assert HEADLINE in whole.stdout
    # when it is named the other ways a Sagaz user types it, then the report is the same
    for args in (
        ["preview-report"],
        ["preview-report", "last"],
        ["preview-report", "--session", "last"],
        ["preview-report", str(session.id)[-8:]],
        ["preview-report", "--session", str(session.id)[:8]],
        ["preview_report", "last"],
    ):
        done = cli(*args)
        assert done.returncode == 0, (args, done.stderr)
        assert done.stdout == whole.stdout, args


def test_preview_report_of_a_session_that_really_ran_says_so():
    dry_proxy_session()
    ran = live_session()  # now the newest
    done = cli("preview-report")
    assert done.returncode == 1
    assert f"The newest proxy session ({ran.id}) did not run in preview" in done.stderr
    assert "semantic-saga status` marks them (preview)" in done.stderr


def test_help_lists_the_aliases_and_explains_one():
    listed = cli("help")
    assert listed.returncode == 0
    assert "[aliases]" in listed.stdout and "preview-report    (= preview_report)" in listed.stdout
    assert "    verify\n" in listed.stdout  # Sagaz's verb is a command of ours
    explained = cli("help", "preview-report")
    assert explained.returncode == 0 and "usage: semantic-saga preview_report" in explained.stdout


def test_version_names_semantic_saga_not_django():
    done = cli("--version")
    assert done.returncode == 0 and done.stdout.startswith("semantic-saga ") and "(Django " in done.stdout


def test_colour_on_a_pipe_only_when_forced_and_never_with_no_color():
    live_session()
    assert "\033[" not in cli("ledger", NO_COLOR=None).stdout
    assert "\033[1msession" in cli("ledger", NO_COLOR=None, FORCE_COLOR="1").stdout
    assert "\033[" not in cli("ledger", FORCE_COLOR="1").stdout  # NO_COLOR wins
    assert "\033[" not in cli("ledger", NO_COLOR=None, FORCE_COLOR="0").stdout


def test_aliases_are_rewritten_in_the_command_place_only():
    assert rewrite(["preview-report", "--session", "preview-report"]) == [
        "preview_report",
        "--session",
        "preview-report",
    ]
    assert rewrite(["help", "verify-audit"]) == ["help", "verify_audit"]
    assert rewrite([]) == []
    assert all(command.replace("_", "-") == alias for alias, command in ALIASES.items())


def _reader_gone(*args: str) -> subprocess.CompletedProcess[str]:
    """`semantic-saga ARGS` writing to a pipe whose reader has already gone."""
    read, write = os.pipe()
    os.close(read)
    try:
        return subprocess.run(
            [SEMANTIC_SAGA, *args],
            stdout=write,
            stderr=subprocess.PIPE,
            env=env(),
            cwd=ROOT,
            text=True,
            timeout=WAIT_SECONDS,
        )
    finally:
        os.close(write)


@pytest.mark.parametrize(
    "args",
    [
        ["ledger", "--json"],
        ["ledger"],
        ["pending"],
        ["pending", "--json"],
        ["status"],
        ["verify"],
        ["preview-report", "--json"],
        ["help"],
    ],
)
def test_a_closed_pipe_ends_every_command_quietly(args: list[str]):
    # given sessions with something to show (the newest one run dry)
    held_call(amount=1)
    dry_proxy_session()
    # when the reader of its output is gone
    done = _reader_gone(*args)
    # then no traceback, and the status a shell gives a Unix tool cut off by its pipe
    assert done.returncode == CLOSED_PIPE_STATUS, done.stderr
    assert (
        "Traceback" not in done.stderr
        and "BrokenPipeError" not in done.stderr
        and "Exception ignored" not in done.stderr
    )


def test_ledger_json_piped_into_head_gives_the_first_row():
    live_session()
    done = subprocess.run(
        ["bash", "-o", "pipefail", "-c", f"{SEMANTIC_SAGA} ledger --json | head -1"],
        env=env(),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=WAIT_SECONDS,
    )
    assert done.stdout.count("\n") == 1 and '"seq": 1' in done.stdout
    assert done.returncode in (0, CLOSED_PIPE_STATUS) and "Traceback" not in done.stderr
