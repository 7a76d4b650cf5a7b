"""Every resources/read and prompts/get through the durable path is a step of its session's saga, class read by the
protocol: journaled before it is sent, with its result (truncated past maxResultBytes with its size) or its failure,
shown in the ledger, in a verifiable audit chain, skipped by undo, forwarded and counted as a read in preview, and
refused by the kill switch, tenant policy and for a viewer with nothing sent. The agent is the official mcp client;
the downstreams are tests/proxy/tiny_server.py over stdio (prefix tiny) and the demo world over Streamable HTTP."""

from __future__ import annotations

import json
from io import StringIO
from pathlib import Path
from typing import Any

import anyio
import pytest
from django.core.management import call_command
from django.db import connections
from mcp.shared.exceptions import MCPError

from audit.models import AuditEvent
from governance.identity.principal import Principal, local_principal
from governance.kill_switch import kill_switch_engage
from sagas.models import Saga, Step
from sagas.protocols.proxy.runtime import journaled
from sagas.selectors import preview_report, saga_verify_audit
from tests.conftest import make_principal
from tests.proxy.agent import MODES, connect, text
from tests.proxy.conftest import EXAMPLES
from tests.proxy.harness import TINY, HttpDownstream, config_file, serve_proxy, stdio

pytestmark = pytest.mark.django_db(transaction=True)
OPERATOR = local_principal(protocol="test", tenant_id="acme")
WELCOME = "Welcome to the tiny world."
META = "io.semantic-saga/proxy"


@pytest.fixture(autouse=True)
def _acme(settings: Any) -> None:
    settings.SAGA_DEFAULT_TENANT = "acme"  # the terminal commands act as the local operator of the proxy's tenant


def _config(tmp_path: Path, demo_http: HttpDownstream, **extra: Any) -> Path:
    servers = {"demo": {"url": demo_http.url}, "tiny": stdio(TINY, prefix="tiny")}
    return config_file(tmp_path, servers, **extra)


async def _read_and_get(client: Any) -> tuple[str, str]:
    """The agent reads the welcome note and gets the greeting prompt: the downstream's own answers."""
    note = await client.read_resource("tiny+note://welcome")
    prompt = await client.get_prompt("tiny__greeting", {"name": "Grace"})
    return note.contents[0].text, prompt.messages[0].content.text


def _session() -> Saga:
    return Saga.objects.get(metadata__has_key="proxy")


def _steps() -> list[Step]:
    return list(Step.objects.filter(saga=_session()).order_by("sequence"))


def _command(*args: str) -> str:
    out = StringIO()
    call_command(*args, stdout=out)
    return out.getvalue()


@pytest.mark.parametrize("mode", MODES)
def test_a_resource_read_and_a_prompt_get_are_journaled_as_reads_with_their_result(
    tmp_path: Path, demo_http: HttpDownstream, mode: str
):
    # given a journaled proxy; when the agent reads a resource and gets a prompt
    with serve_proxy(_config(tmp_path, demo_http), call_path=journaled) as served:

        async def scenario() -> tuple[str, str]:
            async with connect(served.url, mode) as client:
                return await _read_and_get(client)

        note, message = anyio.run(scenario)

    # then the agent got exactly what the downstream answered
    assert (note, message) == (WELCOME, "Say hello to Grace.")
    # and each is a completed step of class read, with its input, result and duration
    read, got = _steps()
    assert (read.action, read.status, read.input) == (
        "proxy.tiny.resources_read",
        "COMPLETED",
        {"uri": "tiny+note://welcome"},
    )
    assert (got.action, got.status) == ("proxy.tiny.prompts_get", "COMPLETED")
    assert got.input == {"name": "tiny__greeting", "arguments": {"name": "Grace"}}
    for step, method in ((read, "resources/read"), (got, "prompts/get")):
        proxy = step.action_definition["proxy"]
        assert (proxy["method"], proxy["class"], proxy["class_source"], proxy["gate"]) == (
            method,
            "read",
            "protocol",
            "allow",
        )
        assert proxy["class_reason"] == f"{method} is a read by the protocol"
        assert step.action_definition["semantic"]["reversibility"] == "read_only"
        assert step.result["size_bytes"] > 0 and step.result["duration_ms"] >= 0 and not step.result["truncated"]
    assert read.result["result"]["contents"][0]["text"] == WELCOME
    assert got.result["result"]["messages"][0]["content"]["text"] == "Say hello to Grace."
    # in the session's audit chain, journaled EXECUTING before the outcome, and the chain verifies
    session = _session()
    for step in (read, got):
        events = AuditEvent.objects.filter(saga_id=session.id, step_id=str(step.id)).order_by("sequence")
        assert [event.event_type for event in events] == ["STEP_STARTED", "STEP_COMPLETED"]
        assert events[0].data["class"] == "read" and "uri" not in json.dumps(events[0].data)
    assert saga_verify_audit(actor=OPERATOR, saga_id=session.id)["valid"] is True
    # and in the ledger, the tool column names the method and what was read
    shown = _command("ledger")
    assert "resources/read tiny+note://welcome" in shown and "prompts/get tiny__greeting" in shown
    rows = [json.loads(line) for line in _command("ledger", "--json").splitlines()]
    assert [(row["tool"], row["server"], row["class"], row["status"]) for row in rows] == [
        ("resources/read tiny+note://welcome", "tiny", "read", "completed"),
        ("prompts/get tiny__greeting", "tiny", "read", "completed"),
    ]
    assert rows[0]["result_bytes"] == read.result["size_bytes"]


def test_a_read_result_past_max_result_bytes_is_truncated_in_the_journal_only(
    tmp_path: Path, demo_http: HttpDownstream
):
    with serve_proxy(_config(tmp_path, demo_http, ledger={"maxResultBytes": 16}), call_path=journaled) as served:

        async def scenario() -> str:
            async with connect(served.url, "legacy") as client:
                return str((await client.read_resource("tiny+note://welcome")).contents[0].text)  # type: ignore[union-attr]

        note = anyio.run(scenario)

    assert note == WELCOME  # the agent gets the whole answer
    (read,) = _steps()
    assert read.result["truncated"] is True and read.result["size_bytes"] > 16
    assert read.result["result"]["truncated"] is True and len(read.result["result"]["prefix"].encode()) <= 16


@pytest.mark.parametrize("mode", MODES)
def test_a_failing_read_is_recorded_failed_and_the_session_goes_on(
    tmp_path: Path, demo_http: HttpDownstream, mode: str
):
    with serve_proxy(_config(tmp_path, demo_http), call_path=journaled) as served:

        async def scenario() -> tuple[MCPError, str]:
            async with connect(served.url, mode) as client:
                with pytest.raises(MCPError) as failed:
                    await client.read_resource("tiny+note://missing")
                after = await client.read_resource("tiny+note://welcome")
                return failed.value, str(after.contents[0].text)  # type: ignore[union-attr]

        error, after = anyio.run(scenario)

    # the agent got the downstream's own error, and the next read still works
    # the downstream's -32002, in the client's era: 2026-07-28 (auto) says -32602 (SEP-2164)
    assert error.code == (-32602 if mode == "auto" else -32002) and "no note" in error.message and after == WELCOME
    failed, read = _steps()
    assert failed.status == "FAILED" and failed.error["code"] == "READ_ERROR" and failed.error["sent"] is True
    assert not failed.uncertain_outcome and "no note" in failed.error["message"]
    assert read.status == "COMPLETED" and _session().status == "ACTIVE"
    assert saga_verify_audit(actor=OPERATOR, saga_id=_session().id)["valid"] is True


def test_undo_skips_reads_and_undoes_the_calls_around_them(tmp_path: Path, demo_http: HttpDownstream):
    config = _config(tmp_path, demo_http, packs=[str(EXAMPLES / "demo_pack.json")])
    with serve_proxy(config, call_path=journaled) as served:

        async def scenario() -> None:
            async with connect(served.url, "legacy") as client:
                await _read_and_get(client)
                created = await client.call_tool("create_contact", {"name": "Reader", "email": "r@example.com"})
                assert not created.is_error, text(created)

        anyio.run(scenario)

    report = json.loads(_command("undo", "last", "--json"))
    assert [(item["tool"], item["verdict"]) for item in report["items"]] == [
        ("create_contact", "undone"),
        ("prompts/get tiny__greeting", "skipped"),
        ("resources/read tiny+note://welcome", "skipped"),
    ]
    assert report["status"] == "ROLLED_BACK"
    read, got, _ = _steps()
    assert (read.status, got.status) == ("COMPLETED", "COMPLETED")  # a read is never compensated


def test_in_preview_reads_run_and_are_counted_as_reads(tmp_path: Path, demo_http: HttpDownstream, operator: Principal):
    with serve_proxy(_config(tmp_path, demo_http, preview=True), call_path=journaled) as served:

        async def scenario() -> tuple[tuple[str, str], Any]:
            async with connect(served.url, "legacy") as client:
                answers = await _read_and_get(client)
                return answers, await client.call_tool("create_contact", {"name": "Dry", "email": "dry@example.com"})

        answers, dry = anyio.run(scenario)

    assert answers == (WELCOME, "Say hello to Grace.") and "recorded, NOT executed" in text(dry)
    assert [step.status for step in _steps()] == ["COMPLETED", "COMPLETED", "DRY"]
    report = preview_report(actor=operator, saga_id=_session().id)
    assert report["reads_executed"] == 2
    assert report["summary"].startswith("Nothing reached the world. 2 read(s) executed, 1 call(s) recorded dry")
    reads = next(group for group in report["classes"] if group["class"] == "read")
    assert reads["count"] == 2 and reads["executed"] is True


def _engage_kill_switch() -> None:
    try:
        kill_switch_engage(actor=OPERATOR, reason="incident 17")
    finally:
        connections.close_all()  # a worker thread's connection would keep the test database from being dropped


def test_the_kill_switch_refuses_a_read_with_nothing_sent(tmp_path: Path, demo_http: HttpDownstream):
    with serve_proxy(_config(tmp_path, demo_http), call_path=journaled) as served:

        async def scenario() -> MCPError:
            async with connect(served.url, "legacy") as client:
                await client.read_resource("tiny+note://welcome")  # the session is open
                await anyio.to_thread.run_sync(_engage_kill_switch)
                with pytest.raises(MCPError) as refused:
                    await client.get_prompt("tiny__greeting", {"name": "Grace"})
                return refused.value

        error = anyio.run(scenario)

    assert "did NOT run and was not sent" in error.message and "kill switch" in error.message
    assert error.data[META]["code"] == "KILL_SWITCH_ENGAGED"
    _, refused = _steps()
    assert refused.status == "REFUSED" and refused.error["code"] == "KILL_SWITCH_ENGAGED"


@pytest.fixture
def use_policy(tmp_path: Path, settings: Any) -> Any:
    def apply(rules: list[dict[str, Any]]) -> None:
        document = {
            "schema_version": 1,
            "revision": "reads",
            "default_effect": "allow",
            "tenants": {"acme": {"rules": rules}},
        }
        path = tmp_path / "policy.json"
        path.write_text(json.dumps(document))
        settings.SAGA_POLICY_MODE = "json"
        settings.SAGA_POLICY_FILE = str(path)

    return apply


def test_tenant_policy_decides_on_reads_and_a_read_is_never_held(tmp_path: Path, demo_http: HttpDownstream, use_policy):
    use_policy(
        [
            {"id": "no-notes", "effect": "deny", "match": {"actions": ["proxy.tiny.resources_read"]}},
            {"id": "ask-first", "effect": "require_approval", "match": {"actions": ["proxy.tiny.prompts_get"]}},
        ]
    )
    with serve_proxy(_config(tmp_path, demo_http), call_path=journaled) as served:

        async def scenario() -> tuple[MCPError, MCPError]:
            async with connect(served.url, "legacy") as client:
                with pytest.raises(MCPError) as denied:
                    await client.read_resource("tiny+note://welcome")
                with pytest.raises(MCPError) as unheld:
                    await client.get_prompt("tiny__greeting", {"name": "Grace"})
                return denied.value, unheld.value

        denied, unheld = anyio.run(scenario)

    assert "no-notes" in denied.message and denied.data[META]["code"] == "POLICY_DENIED"
    assert "approval" in unheld.message and unheld.data[META]["code"] == "READ_NEEDS_APPROVAL"
    assert [(step.status, step.error["code"]) for step in _steps()] == [
        ("REFUSED", "POLICY_DENIED"),
        ("REFUSED", "READ_NEEDS_APPROVAL"),
    ]
    assert not _session().nodes.exists()  # nothing waits in the approval queue


def test_a_viewer_may_list_but_not_read_through_the_proxy(tmp_path: Path, demo_http: HttpDownstream):
    viewer = make_principal("vera", "acme", "viewer")
    with serve_proxy(_config(tmp_path, demo_http), call_path=journaled, principal=viewer) as served:

        async def scenario() -> tuple[list[str], MCPError]:
            async with connect(served.url, "legacy") as client:
                listed = [str(r.uri) for r in (await client.list_resources()).resources]
                with pytest.raises(MCPError) as refused:
                    await client.read_resource("tiny+note://welcome")
                return listed, refused.value

        listed, error = anyio.run(scenario)

    assert listed == ["tiny+note://welcome"]
    assert error.message.startswith("resources/read tiny+note://welcome did not run and was not sent: vera may list")
    assert not Step.objects.exists()  # a viewer's session journals nothing, as for its tools/call
