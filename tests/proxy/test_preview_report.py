"""The preview report of a proxy session run dry (issue 17, item 6): nothing reached the world, the reads that ran
and the calls recorded dry are counted, and the dry calls are grouped by Sagaz class (I, unknown, C, R, read) with
their tools and the gates they would have met, the proxy's gate and tenant policy both; the compensation plan says
what an undo would have done; `semantic-saga preview_report` prints it, in colour only on a terminal."""

from __future__ import annotations

import json
import urllib.request
from io import StringIO
from pathlib import Path
from typing import Any

import anyio
import pytest
from django.core.management import call_command

from governance.identity.principal import Principal
from sagas import coordinator
from sagas.models import Saga
from sagas.protocols.proxy.runtime import journaled
from sagas.selectors import preview_report
from tests.proxy.agent import connect, text
from tests.proxy.harness import HttpDownstream, config_file, serve_proxy
from tests.proxy.preview_session import GATE_COUNTS, GROUPS, PLAN, dry_proxy_session, policy_holding

pytestmark = pytest.mark.django_db(transaction=True)
# Only create_contact has a declared inverse here: delete_contact and update_contact stay unknown by their names.
CREATE_ONLY_PACK = {
    "name": "create-only",
    "description": "Only create_contact is undoable in this test.",
    "entries": [{"tool": "create_contact", "inverse": {"tool": "delete_contact", "args": {"id": "$.result.id"}}}],
}
EMAIL = {"to": "ada@example.com", "subject": "Hello", "body": "Hi"}
TRANSFER = {"from_account": "acc-payroll", "to_account": "acc-vendor", "amount": 25000}


def _world(demo_http: HttpDownstream) -> dict[str, Any]:
    with urllib.request.urlopen(f"http://127.0.0.1:{demo_http.port}/world") as answer:
        return dict(json.loads(answer.read()))


def _config(tmp_path: Path, demo_http: HttpDownstream) -> Path:
    (tmp_path / "create-only.json").write_text(json.dumps(CREATE_ONLY_PACK))
    gates = {"tools": [{"tool": "post_tweet", "server": "demo", "action": "block", "reason": "no tweets today"}]}
    servers = {"demo": {"url": demo_http.url}}
    return config_file(tmp_path, servers, preview=True, packs=["create-only.json"], policy=gates)


async def _agent(url: str, demo_http: HttpDownstream) -> tuple[list[Any], dict[str, Any], dict[str, Any]]:
    async with connect(url, "legacy") as client:
        answers = [
            await client.call_tool("list_contacts", {}),
            await client.call_tool("list_timeline", {"limit": 5}),
        ]
        before = await anyio.to_thread.run_sync(_world, demo_http)  # the reads are in its call log
        answers += [
            await client.call_tool("create_contact", {"name": "Margaret Hamilton", "email": "mh@example.com"}),
            await client.call_tool("update_contact", {"id": "c-1", "email": "ada@analytical.example"}),
            await client.call_tool("delete_contact", {"id": "c-3"}),
            await client.call_tool("send_email", EMAIL),
            await client.call_tool("post_tweet", {"text": "Margaret joined the CRM"}),
            await client.call_tool("transfer_funds", TRANSFER),
        ]
        return answers, before, await anyio.to_thread.run_sync(_world, demo_http)


def test_a_dry_session_is_reported_by_sagaz_class_with_the_would_have_gates(
    tmp_path: Path, demo_http: HttpDownstream, operator: Principal, settings: Any
):
    policy_holding(tmp_path, settings, "proxy.demo.update_contact")
    with serve_proxy(_config(tmp_path, demo_http), call_path=journaled) as served:
        answers, before, after = anyio.run(_agent, served.url, demo_http)

    assert before == after  # nothing reached the world, its call log included
    assert not answers[0].is_error and all("recorded, NOT executed" in text(a) for a in answers[2:])
    report = preview_report(actor=operator, saga_id=Saga.objects.get(metadata__has_key="proxy").id)
    assert report["grouping"] == "sagaz_class"
    assert report["summary"] == (
        "Nothing reached the world. 2 read(s) executed, 6 call(s) recorded dry: 1 would be blocked by the gate; "
        "3 would run; 2 would wait for approval."
    )
    assert (report["reads_executed"], report["recorded_dry"]) == (2, 6)
    assert [(g["class"], g["count"], g["tools"]) for g in report["classes"]] == GROUPS
    assert [g["gates"] for g in report["classes"]] == GATE_COUNTS
    update = next(i for i in report["items"] if i["tool"] == "update_contact")
    assert update["would_gate"] == "confirm" and "crm-edits" in update["why"]  # what policy would have done
    tweet = next(i for i in report["items"] if i["tool"] == "post_tweet")
    assert tweet["outside_preview"] == "would be blocked by the gate" and "no tweets today" in tweet["why"]
    assert [(e["tool"], e["undo"], e["compensation"]) for e in report["compensation_plan"]] == PLAN

    # the command prints the same, plain in a pipe
    out = StringIO()
    call_command("preview_report", report["saga_id"], stdout=out)
    printed = out.getvalue()
    assert report["summary"] in printed and "\033[" not in printed
    assert "I            1      0        1      0  demo/transfer_funds\n" in printed
    assert "unknown      2      1        1      0  demo/delete_contact, demo/update_contact\n" in printed
    assert "read         2      2        0      0  demo/list_contacts, demo/list_timeline (executed)\n" in printed
    assert "7  post_tweet      demo    C        block    would be blocked by the gate" in printed
    assert "runs its declared inverse demo/delete_contact" in printed


class Terminal(StringIO):
    def isatty(self) -> bool:
        return True


def test_the_command_colours_classes_and_gates_only_on_a_terminal(monkeypatch: pytest.MonkeyPatch):
    session = dry_proxy_session()
    monkeypatch.delenv("NO_COLOR", raising=False)
    coloured = Terminal()
    call_command("preview_report", str(session.id), stdout=coloured)
    assert "\033[31mI" in coloured.getvalue() and "\033[33m" in coloured.getvalue()  # I in red, a confirm in yellow
    monkeypatch.setenv("NO_COLOR", "1")
    plain = Terminal()
    call_command("preview_report", str(session.id), stdout=plain)
    assert "\033[" not in plain.getvalue() and "what would have happened" in plain.getvalue()


def test_a_registered_action_preview_keeps_its_reversibility_report(operator: Principal):

    saga = coordinator.saga_begin(actor=operator, preview=True)
    report = preview_report(actor=operator, saga_id=saga.id)
    assert (
        report["grouping"] == "reversibility"
        and report["summary"] == "Nothing reached the world. 0 step(s) recorded dry."
    )
