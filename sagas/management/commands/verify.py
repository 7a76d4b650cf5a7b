"""`semantic-saga verify [--session ID|last] [--json]`: walk one proxy session's audit hash chain (Sagaz's `verify`),
one line per link (`✓ seq N event tool  prev → hash`, hashes shortened to 12 characters), then OK, or BROKEN with
what broke and where; then check each call's step row against the digests of its arguments, result and captured
state, status and uncertain flag that the chain holds (sagas.selectors.journal_digests), naming each field edited
since, and digests rewritten without this deployment's key (their MAC, from SECRET_KEY). Exits 1 on a break or an
edited row. The hashes are recomputed by the audit chain's own verification (sagas.selectors.proxy_chain);
`verify_audit` checks every chain of the deployment."""

from __future__ import annotations

import json
import sys
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from sagas.management.proxy_cli import SESSION_HELP, operator, refusals, session
from sagas.management.terminal import Paint
from sagas.selectors.journal_digests import FORGED, RESTORE, REWRITTEN, JournalCheck, journal_check
from sagas.selectors.proxy_chain import ChainLink, ChainWalk, session_chain

SHOWN_HASH_CHARS = 12
BROKEN_STATUS = 1


class Command(BaseCommand):
    help = (
        "Verify a proxy session's audit hash chain (the newest by default): one line per link, then OK or the first "
        "break (what broke, where); then each call's row against the digests the chain holds. Exits 1 if the chain "
        "is broken or a row was edited."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("session_ref", nargs="?", default=None, metavar="SESSION", help=SESSION_HELP)
        parser.add_argument("--session", default=None, help=f"{SESSION_HELP} (as Sagaz's --session)")
        parser.add_argument("--json", action="store_true", help="The walk as one JSON object.")

    def handle(self, *args: Any, **options: Any) -> None:
        actor = operator()
        saga = session(actor, options["session"] or options["session_ref"])
        with refusals():
            walk = session_chain(actor=actor, saga=saga)
            journal = journal_check(actor=actor, saga=saga)
        if options["json"]:
            document = {**walk.as_json(), "chain_valid": walk.valid, "journal": journal.as_json()}
            document["valid"] = walk.valid and journal.valid
            self.stdout.write(json.dumps(document, sort_keys=True))
        else:
            paint = Paint.for_stream(self.stdout)
            self._show(walk, journal, paint)
            self._show_edits(journal, paint)
        if not (walk.valid and journal.valid):
            self.stdout.flush()
            sys.exit(BROKEN_STATUS)

    def _show(self, walk: ChainWalk, journal: JournalCheck, paint: Paint) -> None:
        self.stdout.write(paint("verify", "bold") + f" session {walk.saga_id}")
        links = walk.verified + ([walk.broken] if walk.broken else [])
        widths = (max([3, *(len(str(k.sequence)) for k in links)]), max([0, *(len(k.event_type) for k in links)]))
        tools = max([0, *(len(k.tool) for k in links)])
        for link in walk.verified:
            self.stdout.write(f"  {paint('✓', 'green')} {_line(link, widths, tools, paint)}")
        if walk.broken is not None:
            self.stdout.write(f"  {paint('✗', 'red')} {_line(walk.broken, widths, tools, paint)}")
        if walk.valid:
            self.stdout.write(f"{paint('OK', 'green')} {len(walk.verified)} link(s) chained{_rows(journal)}")
            return
        where = f"at seq {walk.failed_sequence} after {len(walk.verified)} verified link(s)"
        what = ""
        if walk.broken is not None and walk.broken.sequence == walk.failed_sequence:
            step = f", {walk.broken.step_id}" if walk.broken.step_id else ""
            what = f" (the event {walk.broken.event_type}{' of ' + walk.broken.tool if walk.broken.tool else ''}{step})"
        self.stdout.write(f"{paint('BROKEN', 'red+bold')} {where}{what}: {walk.reason}")
        self.stdout.write(
            f"Nothing from this link on is vouched for. `semantic-saga verify_audit --saga {walk.saga_id} --json` "
            "gives the same verdict for your records; compare with an export (export_audit) or a backup to see what "
            "changed."
        )

    def _show_edits(self, journal: JournalCheck, paint: Paint) -> None:
        """Each field of a call row that no longer matches its digest, then what to do."""
        if journal.valid:
            return
        for edit in journal.edits:
            self.stdout.write(f"  {paint('✗', 'red')} {edit.sentence()}")
        calls = len({edit.step_id for edit in journal.edits})
        self.stdout.write(
            f"{paint('EDITED', 'red+bold')} {len(journal.edits)} field(s) of {calls} call row(s) of session "
            f"{journal.saga_id} no longer match the digests the chain holds. {RESTORE}."
        )
        if any(edit.field == FORGED for edit in journal.edits):
            self.stdout.write(f"{paint('REWRITTEN', 'red+bold')} {REWRITTEN}.")


def _rows(journal: JournalCheck) -> str:
    """What the OK line adds about the call rows: all match, and how many predate digests (not checked)."""
    if not journal.valid or not (journal.checked or journal.unchecked):
        return ""
    older = f"; {journal.unchecked} journaled before digests were kept, not checked" if journal.unchecked else ""
    return f"; the rows of {journal.checked} call(s) match their digests{older}"


def _line(link: ChainLink, widths: tuple[int, int], tools: int, paint: Paint) -> str:
    previous = link.previous_hash[:SHOWN_HASH_CHARS] or "genesis"
    own = link.event_hash[:SHOWN_HASH_CHARS]
    seq, event = widths
    chain = f"{paint(previous.ljust(SHOWN_HASH_CHARS), 'dim')} → {own}"
    return f"seq {str(link.sequence).rjust(seq)}  {link.event_type.ljust(event)}  {link.tool.ljust(tools)}  {chain}"
