"""`semantic-saga` commands as a person runs them: at a terminal (a pseudo-terminal on standard input, output and
error), typing `answer` when asked. `approve` and `deny` decide only there."""

from __future__ import annotations

import os
import pty
import subprocess
import sys
from pathlib import Path

from tests.distributed.workers import shared_database_url

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
WAIT_SECONDS = 60


def at_terminal(
    *args: str, answer: str = "yes", tenant: str = "acme", colour: bool = False
) -> subprocess.CompletedProcess[str]:
    """Run `semantic-saga ARGS` on a pseudo-terminal, typing `answer` and Enter; its output is stdout (a terminal
    has one stream: what was typed is echoed there too). NO_COLOR is set unless `colour`."""
    env = {**os.environ, "DATABASE_URL": shared_database_url(), "SAGA_DEFAULT_TENANT": tenant, "NO_COLOR": "1"}
    if colour:
        env.pop("NO_COLOR")
    return run_at_terminal([str(BIN / "semantic-saga"), *args], env=env, cwd=ROOT, answer=answer)


def run_at_terminal(
    argv: list[str], *, env: dict[str, str], cwd: Path, answer: str = "yes"
) -> subprocess.CompletedProcess[str]:
    """Run `argv` on a pseudo-terminal with exactly `env`, typing `answer` and Enter (at_terminal's engine; also
    for a command of another installation, tests/install)."""
    primary, secondary = pty.openpty()
    try:
        proc = subprocess.Popen(argv, stdin=secondary, stdout=secondary, stderr=secondary, env=env, cwd=cwd)
    finally:
        os.close(secondary)
    os.write(primary, f"{answer}\n".encode())
    output = bytearray()
    try:
        while chunk := _read(primary):
            output += chunk
    finally:
        os.close(primary)
    returncode = proc.wait(timeout=WAIT_SECONDS)
    text = output.decode("utf-8", errors="replace").replace("\r\n", "\n")
    return subprocess.CompletedProcess(proc.args, returncode, text, text)


def _read(fd: int) -> bytes:
    try:
        return os.read(fd, 65536)
    except OSError:  # EIO: every holder of the terminal's other end has closed it (the command ended)
        return b""
