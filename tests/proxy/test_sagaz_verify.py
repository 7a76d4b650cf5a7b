"""`semantic-saga verify [--session ID|last]` as a Sagaz user runs it: one line per link of the session's audit chain
(`✓ seq N event tool  prev → hash`), OK and exit 0; an event changed behind the coordinator's back (raw SQL) is named
as the break, with where and what, and the command exits 1; so are the newest events deleted, which the chain alone
would not show."""

from __future__ import annotations

import json
import re
from itertools import pairwise

import pytest
from django.db import connection

from audit.models import AuditEvent
from tests.proxy.preview_session import dry_proxy_session
from tests.proxy.sagaz_user import cli, live_session
from tests.proxy.terminal import at_terminal

pytestmark = pytest.mark.django_db(transaction=True)
LINK = re.compile(r"^  ✓ seq +(\d+)  (\S+) +(\S*) +(genesis|[0-9a-f]{12}) +→ ([0-9a-f]{12})$")


def _raw(sql: str, event: AuditEvent) -> None:
    """`sql` on the audit table for one event, as someone with database access would run it."""
    with connection.cursor() as cursor:
        pk = AuditEvent._meta.pk.get_db_prep_value(event.pk, connection)  # type: ignore[union-attr]
        cursor.execute(sql.format(table=AuditEvent._meta.db_table), [pk])


def test_verify_walks_every_link_of_the_newest_session_and_says_ok():
    # given a session whose calls ran
    session = live_session()
    events = list(AuditEvent.objects.filter(saga_id=session.id).order_by("sequence"))
    # when a Sagaz user types `verify` (no session: the newest)
    done = cli("verify")
    # then one line per link, each chained to the one before, hashes shortened as Sagaz shows them
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == f"verify session {session.id}"
    links = [LINK.match(line) for line in lines[1:-1]]
    assert all(links), lines
    assert [int(m.group(1)) for m in links if m] == [event.sequence for event in events]
    assert [m.group(5) for m in links if m] == [event.event_hash[:12] for event in events]
    assert links[0] and links[0].group(4) == "genesis"
    assert all(b and a and b.group(4) == a.group(5) for a, b in pairwise(links))
    assert any(m and m.group(3) == "demo/create_contact" for m in links)
    assert lines[-1] == f"OK {len(events)} link(s) chained; the rows of 4 call(s) match their digests"


def test_verify_names_a_tampered_event_and_exits_1():
    # given a preview session, and someone who rewrites one dry call's event as if it had run
    session = dry_proxy_session()
    tampered = AuditEvent.objects.get(saga_id=session.id, event_type="STEP_DRY", action="proxy.demo.transfer_funds")
    _raw("UPDATE {table} SET status = 'COMPLETED' WHERE id = %s", tampered)
    # when
    done = cli("verify", "--session", str(session.id))
    # then the links before it verify, the break is named (where, which event, why) and the exit status is 1
    assert done.returncode == 1, done.stdout + done.stderr
    out = done.stdout
    assert f"✓ seq {tampered.sequence - 1:>3}" in out
    assert f"  ✗ seq {tampered.sequence:>3}  STEP_DRY" in out
    assert (
        f"BROKEN at seq {tampered.sequence} after {tampered.sequence - 1} verified link(s) (the event STEP_DRY of "
        f"demo/transfer_funds, {tampered.step_id}): event content does not match its event_hash (modified row)"
    ) in out
    assert "OK" not in out.splitlines()[-1]
    # and --json says the same to a script
    walked = cli("verify", "--session", str(session.id), "--json")
    report = json.loads(walked.stdout)
    assert walked.returncode == 1
    assert report["valid"] is False and report["failed_sequence"] == tampered.sequence
    assert report["broken_link"]["tool"] == "demo/transfer_funds"
    assert [link["seq"] for link in report["links"]] == list(range(1, tampered.sequence))


def test_verify_notices_the_newest_events_deleted():
    # given a session whose last event was deleted (the chain that remains still verifies on its own)
    session = live_session()
    newest = AuditEvent.objects.filter(saga_id=session.id).order_by("-sequence").first()
    assert newest is not None
    _raw("DELETE FROM {table} WHERE id = %s", newest)
    # when
    done = cli("verify", "last")
    # then
    assert done.returncode == 1
    assert (
        f"BROKEN at seq {newest.sequence} after {newest.sequence - 1} verified link(s): the chain ends at seq "
        f"{newest.sequence - 1} but the session records {newest.sequence} events: the newest 1 were deleted"
    ) in done.stdout


def test_verify_paints_only_at_a_terminal_and_never_with_no_color():
    live_session()
    coloured = at_terminal("verify", answer="", colour=True)
    plain = at_terminal("verify", answer="")
    piped = cli("verify")
    assert "\033[32m✓\033[0m" in coloured.stdout and "\033[" not in plain.stdout and "\033[" not in piped.stdout


def test_no_color_also_silences_the_colour_of_an_error_at_a_terminal():
    # Django paints a command's error red on a terminal; NO_COLOR must win there too
    coloured = at_terminal("verify", "--session", "nope", answer="", colour=True)
    plain = at_terminal("verify", "--session", "nope", answer="")
    assert coloured.returncode == plain.returncode == 1
    assert "PROXY_SESSION_NOT_FOUND" in plain.stdout and "\033[" in coloured.stdout and "\033[" not in plain.stdout
