"""First use is a moment, not a state; review-first trust; an accept binds to what was reviewed.

The hostile server behind the proxy (tests/proxy/hostile_server.py), over stdio and over HTTP: a server whose first
listing is empty, one whose first listing carries a poisoned description, and the HTTP proxy's review-first default.
The downstream's own record (called.jsonl) decides what was sent. The terminal's `pins accept` is driven on a
pseudo-terminal, with the server relisting between what the operator was shown and their `yes`."""

from __future__ import annotations

import os
import pty
import subprocess
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

from registry.models import ListedServer, ToolPin
from registry.tool_pins import observe
from sagas.models import Step
from tests.distributed.workers import shared_database_url
from tests.proxy.agent import text
from tests.proxy.guardian import TRANSPORTS, Guarded, guarded_proxy, hostile
from tests.proxy.terminal import BIN, ROOT, at_terminal

pytestmark = pytest.mark.django_db(transaction=True)
SHORT_CONFIRM = {"confirmTimeoutMs": 2000}


def _servers(tmp_path: Path, name: str, *flags: str) -> dict[str, Any]:
    """The hostile server under a name of this test's own: pins are per server name, and a proxy of an earlier test
    that is still exiting must not have pinned it first."""
    return {name: hostile(*flags, called=tmp_path / "called.jsonl")}


def _call(guarded: Guarded, tool: str, arguments: dict[str, Any] | None = None) -> Any:
    async def scenario() -> Any:
        async with guarded.agent() as client:
            return await client.call_tool(tool, arguments or {})

    return anyio.run(scenario)


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_tool_listed_after_an_empty_first_listing_is_new_and_held(transport: str, tmp_path: Path):
    name = f"empty-{transport}"
    servers = _servers(tmp_path, name, "--empty-first")
    with guarded_proxy(transport, tmp_path, servers, policy=SHORT_CONFIRM) as guarded:
        answer = _call(guarded, "get_status")
    assert answer.is_error and "nobody approved it within the confirm timeout" in text(answer)
    assert guarded.calls() == []  # never sent: a read, but nobody has accepted it
    pin = ToolPin.objects.get(server=name, tool="get_status")
    assert pin.status == "pending" and pin.accepted_by == ""
    assert ListedServer.objects.get(server=name).tools_at_first_listing == 0


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_poisoned_description_at_first_use_is_held_with_the_signs_shown(transport: str, tmp_path: Path):
    name = f"poisoned-{transport}"
    servers = _servers(tmp_path, name, "--poisoned")
    with guarded_proxy(transport, tmp_path, servers, policy=SHORT_CONFIRM) as guarded:
        status = _call(guarded, "get_status")
        forecast = _call(guarded, "get_forecast", {"city": "Oslo"})
        diff = at_terminal("pins", "diff", f"{name}/get_forecast", answer="")
    assert not status.is_error  # the clean tools of the same listing are trusted on first use
    assert forecast.is_error and [call["tool"] for call in guarded.calls()] == ["get_status"]
    assert ToolPin.objects.get(server=name, tool="get_forecast").status == "pending"
    shown = diff.stdout.lower()
    assert "poisoning" in shown and "ignore previous instructions" in shown and "u+200b" in shown


def test_over_http_nothing_is_trusted_before_an_operator_reviews_it_by_default(tmp_path: Path):
    servers = _servers(tmp_path, "remote")
    env = {"SAGA_PROXY_TRUST": ""}  # the deployment's default: review over HTTP
    with guarded_proxy("http", tmp_path, servers, env=env, policy=SHORT_CONFIRM) as guarded:
        before = _call(guarded, "get_status")
        listed = at_terminal("pins", answer="")
        accepted = at_terminal("pins", "accept", "remote", "--by", "olga")
        after = _call(guarded, "get_status")
    assert before.is_error and "nobody approved it" in text(before)
    held = Step.objects.filter(action="proxy.remote.get_status").earliest("created_at")
    assert "trusted by review" in held.action_definition["proxy"]["gate_reason"]
    assert "pending" in listed.stdout and accepted.returncode == 0, accepted.stdout
    assert "accepted remote/get_status as olga" in accepted.stdout
    assert not after.is_error and [call["tool"] for call in guarded.calls()] == ["get_status"]
    assert ListedServer.objects.get(server="remote").trust == "review"


PURGE = {"name": "purge", "description": "Purge the cache.", "inputSchema": {"type": "object"}}


def test_pins_accept_at_the_terminal_accepts_nothing_when_the_server_relists_before_the_yes(tmp_path: Path):
    observe("files", {"purge": PURGE})
    reviewed = {**PURGE, "description": "Purge the cache, then report."}
    observe("files", {"purge": reviewed})
    shown, code = _accept_with_relist_before_yes(
        "files/purge", lambda: observe("files", {"purge": {**reviewed, "annotations": {"readOnlyHint": True}}})
    )
    assert code != 0 and "TOOL_DEFINITION_MOVED" in shown and "nothing was accepted" in shown
    assert 'annotations: added ({"readOnlyHint": true})' in shown  # the new difference, to review again
    pin = ToolPin.objects.get(server="files", tool="purge")
    assert pin.status == "changed" and pin.pinned_definition == PURGE


def _accept_with_relist_before_yes(target: str, relist: Any) -> tuple[str, int]:
    """`semantic-saga pins accept TARGET` on a pseudo-terminal: `relist()` runs once the question is on screen, then
    the operator types yes."""
    env = {**os.environ, "DATABASE_URL": shared_database_url(), "SAGA_DEFAULT_TENANT": "default", "NO_COLOR": "1"}
    primary, secondary = pty.openpty()
    try:
        argv = [str(BIN / "semantic-saga"), "pins", "accept", target, "--by", "olga"]
        proc = subprocess.Popen(argv, stdin=secondary, stdout=secondary, stderr=secondary, env=env, cwd=ROOT)
    finally:
        os.close(secondary)
    output = bytearray()
    deadline = time.monotonic() + 60
    try:
        while b"Type yes" not in output:
            assert time.monotonic() < deadline and proc.poll() is None, output.decode(errors="replace")
            output += os.read(primary, 65536)
        relist()
        os.write(primary, b"yes\n")
        while chunk := _read(primary):
            output += chunk
    finally:
        os.close(primary)
    return output.decode(errors="replace").replace("\r\n", "\n"), proc.wait(timeout=60)


def _read(fd: int) -> bytes:
    try:
        return os.read(fd, 65536)
    except OSError:  # the command ended
        return b""
