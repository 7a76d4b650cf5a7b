"""Short ids and `ledger --json`, read as a Sagaz user's scripts read them: `pending` shows the id's last 8
characters and `approve`/`deny` take them (or a unique prefix); `ledger --session` takes a prefix, a suffix or
`last`; a short id naming several sessions is refused with the candidates, one naming none is not found, and another
tenant's rows are never candidates; each `ledger --json` line parses alone and carries the arguments, pre-state,
result as stored and whether truncated, class and its reason, gate, undo status and the audit link's hashes."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest

from audit.models import AuditEvent
from governance.identity.principal import local_agent
from sagas import coordinator
from sagas.models import Node, Saga, Step
from tests.proxy.facts import session_facts
from tests.proxy.sagaz_user import LIVE_CALLS, cli, held_call, live_session
from tests.proxy.terminal import at_terminal

pytestmark = pytest.mark.django_db(transaction=True)


def _ndjson(out: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in out.splitlines()]


def _session_with_id(pk: str, tenant: str = "acme") -> Saga:
    """A proxy session whose id is `pk` (chosen, so that two can share a prefix)."""
    opened = coordinator.proxy_session_open(actor=local_agent("mcp-proxy-stdio", tenant), session=session_facts())
    Saga.objects.filter(pk=opened.pk).update(id=uuid.UUID(pk))
    return Saga.objects.get(pk=pk)


def test_pending_shows_the_short_id_that_approve_and_deny_take():
    # given two held calls
    first, second = held_call(amount=1), held_call(amount=2)
    # when a person reads `pending` and types the id it shows, or the start of another's
    listed = cli("pending")
    shown = {line.split()[0] for line in listed.stdout.splitlines() if "transfer_funds" in line}
    approved = at_terminal("approve", str(first.id)[-8:], "--by", "olga")
    denied = at_terminal("deny", str(second.id)[:6], "--by", "dora")
    # then
    assert shown == {str(first.id)[-8:], str(second.id)[-8:]}
    assert approved.returncode == 0, approved.stdout
    assert denied.returncode == 0, denied.stdout
    assert Node.objects.get(pk=first.pk).status == "READY" and Node.objects.get(pk=second.pk).status == "REJECTED"
    assert {row["id"] for row in _ndjson(cli("pending", "--json").stdout)} == set()  # nothing waits any more


def test_pending_json_keeps_the_whole_id_beside_the_short_one():
    node = held_call(amount=5)
    [row] = _ndjson(cli("pending", "--json").stdout)
    assert row["id"] == str(node.id) and row["short_id"] == str(node.id)[-8:]


def test_an_unknown_short_id_decides_nothing():
    node = held_call(amount=7)
    refused = at_terminal("approve", "ffffeeee", "--by", "olga")
    assert refused.returncode != 0 and "HELD_CALL_NOT_FOUND" in refused.stdout
    assert Node.objects.get(pk=node.pk).status == "WAITING_APPROVAL"


def test_ledger_session_takes_a_prefix_a_suffix_or_last_and_refuses_an_ambiguous_one():
    # given two sessions of acme sharing a prefix, and another tenant's session ending like one of them
    one = _session_with_id("5a5a0000-0000-4000-8000-000000000001")
    _session_with_id("5a5a0000-0000-4000-8000-000000000002")
    _session_with_id("7b7b0000-0000-4000-8000-000000000001", tenant="globex")
    # when / then a unique suffix or prefix names one session (the other tenant's is no candidate)
    for ref in ("00000001", "8000-000000000001", "5A5A0000-0000-4000-8000-000000000001", one.id.hex):
        named = cli("ledger", "--session", ref)
        assert named.returncode == 0, named.stderr
        assert named.stdout.startswith(f"session {one.id}")
    # an ambiguous prefix lists the candidates and says to type more
    ambiguous = cli("ledger", "--session", "5a5a")
    assert ambiguous.returncode == 1
    assert "AMBIGUOUS_ID: '5a5a' names more than one proxy session:" in ambiguous.stderr
    assert "5a5a0000-0000-4000-8000-000000000001, 5a5a0000-0000-4000-8000-000000000002" in ambiguous.stderr
    assert "Type more characters" in ambiguous.stderr
    # none is the usual not-found; too short names nothing
    assert "PROXY_SESSION_NOT_FOUND" in cli("ledger", "--session", "7b7b").stderr
    assert "ID_TOO_SHORT" in cli("ledger", "--session", "5a5").stderr


def test_ledger_json_rows_carry_what_a_sagaz_script_reads():
    # given a session whose calls ran: a read, two R calls (one with a captured pre-state) and a C call
    session = live_session()
    # when a script reads `ledger --json` one line at a time
    done = cli("ledger", "--json", "--session", str(session.id)[:8])
    rows = _ndjson(done.stdout)
    # then every call is there in order, with Sagaz's fields and ours
    assert [row["seq"] for row in rows] == [1, 2, 3, 4]
    assert [row["tool"] for row in rows] == [tool for tool, *_ in LIVE_CALLS]
    for row, (tool, effect_class, arguments, answer, pre_state) in zip(rows, LIVE_CALLS, strict=True):
        step = Step.objects.get(pk=row["id"])
        link = AuditEvent.objects.get(saga_id=session.id, step_id=str(step.id), event_type="STEP_COMPLETED")
        assert row["session_id"] == str(session.id) and row["server"] == "demo"
        assert row["arguments"] == arguments and row["pre_state"] == pre_state
        assert row["result"] == answer["structuredContent"] and row["result_truncated"] is False
        assert row["class"] == effect_class and row["class_source"] == "rule"
        assert row["class_reason"] == f"{tool}: a rule says so"
        assert row["gate"] == "allow" and row["status"] == "completed" and row["undo_status"] == "none"
        assert (row["prev_hash"], row["hash"], row["audit_seq"]) == (link.previous_hash, link.event_hash, link.sequence)
        assert row["ts_start"] <= row["ts_end"]


def test_ledger_json_says_when_a_result_was_kept_only_in_part():
    big = [("list_contacts", "read", {}, {"structuredContent": {"items": ["x" * 500]}}, None)]
    live_session(big, max_result_bytes=100)
    [row] = _ndjson(cli("ledger", "--json").stdout)
    assert row["result_truncated"] is True and row["result_bytes"] > 100
    assert row["hash"] == AuditEvent.objects.get(step_id=row["id"], event_type="STEP_COMPLETED").event_hash


def test_ledger_json_names_the_undo_status_after_an_undo():
    session = live_session()
    undone = cli("undo", str(session.id)[-8:], "--json")
    assert undone.returncode in (0, 1, 3), undone.stderr  # 3: undone with calls left
    statuses = {row["tool"]: row["undo_status"] for row in _ndjson(cli("ledger", "--json").stdout)}
    assert statuses["send_email"] == "needs_decision" and statuses["list_contacts"] == "none"
