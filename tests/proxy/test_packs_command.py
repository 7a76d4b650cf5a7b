"""`semantic-saga packs --config FILE`: the packs a configuration loads and, per server, the tools no pack covers
(with their class), the real demo world as downstream; a server that is down is said to be down (exit 1); colour
only on a terminal, and never with NO_COLOR."""

from __future__ import annotations

import os
import pty
import subprocess
import sys
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command

from tests.distributed.workers import free_port
from tests.proxy.conftest import EXAMPLES
from tests.proxy.harness import DEMO, ROOT, config_file, stdio

BIN = Path(sys.executable).parent
PACK = str(EXAMPLES / "demo_pack.json")


def _packs(config: Path) -> str:
    out = StringIO()
    call_command("packs", "--config", str(config), "--timeout", "30", stdout=out)
    return out.getvalue()


def test_packs_lists_the_entries_and_the_tools_no_pack_covers(tmp_path: Path):
    config = config_file(tmp_path, {"demo": stdio(DEMO)}, packs=[PACK])
    # when
    lines = _packs(config).splitlines()
    # then the pack's three entries, each with its capture and inverse
    assert lines[0] == f"1 compensation pack(s) loaded by {config}"
    assert lines[3].split() == ["demo-crm", "create_contact", "any", "-", "delete_contact"]
    assert lines[4].split() == ["demo-crm", "delete_contact", "any", "get_contact", "create_contact"]
    # and the demo world's uncovered tools, each with the class the proxy gives it
    assert "demo: 10 tool(s), 3 covered by a pack:" in lines
    uncovered = {
        line.split()[0]: line.split()[1] for line in lines[lines.index("demo: 10 tool(s), 3 covered by a pack:") + 3 :]
    }
    assert uncovered == {
        "get_contact": "read",
        "list_contacts": "read",
        "send_email": "C",
        "post_tweet": "C",
        "list_timeline": "read",
        "transfer_funds": "I",
        "get_call_log": "read",
    }
    assert "\033[" not in "\n".join(lines)  # not a terminal: no colour


def test_capture_off_marks_the_entries_that_need_one(tmp_path: Path):
    config = config_file(tmp_path, {"demo": stdio(DEMO)}, packs=[PACK], capture=False)
    out = _packs(config)
    assert "update_contact (off: needs a capture, and capture is false)" in out
    assert "delete_contact (off" not in out  # create_contact's inverse needs no capture


def test_a_server_that_is_down_is_reported_and_exits_1(tmp_path: Path):
    down = f"http://127.0.0.1:{free_port()}/mcp"
    config = config_file(tmp_path, {"demo": stdio(DEMO), "bank": {"url": down}}, packs=[PACK])
    out = StringIO()
    # when
    with pytest.raises(SystemExit) as exited:
        call_command("packs", "--config", str(config), "--timeout", "30", stdout=out)
    # then the demo world is still listed, and the bank is honestly unknown
    assert exited.value.code == 1
    assert "demo: 10 tool(s), 3 covered by a pack:" in out.getvalue()
    assert "bank: DOWN (ConnectError" in out.getvalue()
    assert "its tools could not be listed, so which of them no pack covers is not known" in out.getvalue()


def test_a_bad_configuration_names_the_problem(tmp_path: Path):
    config = config_file(tmp_path, {"demo": {"command": "x", "url": "http://127.0.0.1:1/mcp"}})
    done = subprocess.run(
        [str(BIN / "semantic-saga"), "packs", "--config", str(config)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 1 and "servers.demo: give either command" in done.stderr


def _on_a_terminal(config: Path, **env: str) -> str:
    """The command's stdout when it is a pseudo-terminal."""
    controller, terminal = pty.openpty()
    with subprocess.Popen(
        [str(BIN / "semantic-saga"), "packs", "--config", str(config)],
        stdout=terminal,
        stderr=subprocess.DEVNULL,
        cwd=ROOT,
        env={**os.environ, **env},
    ) as proc:
        os.close(terminal)
        chunks = []
        while True:
            try:
                chunk = os.read(controller, 4096)
            except OSError:  # the terminal closed: the command is done
                break
            if not chunk:
                break
            chunks.append(chunk)
        proc.wait(timeout=60)
    os.close(controller)
    return b"".join(chunks).decode()


def test_colour_only_on_a_terminal_and_never_with_no_color(tmp_path: Path):
    config = config_file(tmp_path, {"demo": stdio(DEMO)}, packs=[PACK])
    coloured = _on_a_terminal(config, NO_COLOR="")
    plain = _on_a_terminal(config, NO_COLOR="1")
    assert "\033[31mI" in coloured and "transfer_funds" in coloured
    assert "\033[" not in plain and "transfer_funds" in plain
