"""`semantic-saga verify [--session ID|last] [--json]`: walk one proxy session's audit hash chain (Sagaz's `verify`),
one line per link (`✓ seq N event tool  prev → hash`, hashes shortened to 12 characters), then OK, or BROKEN with
what broke and where. Exits 1 on a break. The hashes are recomputed by the audit chain's own verification
(sagas.selectors.proxy_chain); `verify_audit` checks every chain of the deployment."""

from __future__ import annotations

import json
import sys
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from sagas.management.proxy_cli import SESSION_HELP, operator, refusals, session
from sagas.management.terminal import Paint
from sagas.selectors.proxy_chain import ChainLink, ChainWalk, session_chain

SHOWN_HASH_CHARS = 12
BROKEN_STATUS = 1


class Command(BaseCommand):
    help = (
        "Verify a proxy session's audit hash chain (the newest by default): one line per link, then OK or the first "
        "break (what broke, where). Exits 1 if the chain is broken."
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
        if options["json"]:
            self.stdout.write(json.dumps(walk.as_json(), sort_keys=True))
        else:
            self._show(walk, Paint.for_stream(self.stdout))
        if not walk.valid:
            self.stdout.flush()
            sys.exit(BROKEN_STATUS)

    def _show(self, walk: ChainWalk, paint: Paint) -> None:
        self.stdout.write(paint("verify", "bold") + f" session {walk.saga_id}")
        links = walk.verified + ([walk.broken] if walk.broken else [])
        widths = (max([3, *(len(str(k.sequence)) for k in links)]), max([0, *(len(k.event_type) for k in links)]))
        tools = max([0, *(len(k.tool) for k in links)])
        for link in walk.verified:
            self.stdout.write(f"  {paint('✓', 'green')} {_line(link, widths, tools, paint)}")
        if walk.broken is not None:
            self.stdout.write(f"  {paint('✗', 'red')} {_line(walk.broken, widths, tools, paint)}")
        if walk.valid:
            self.stdout.write(f"{paint('OK', 'green')} {len(walk.verified)} link(s) chained")
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


def _line(link: ChainLink, widths: tuple[int, int], tools: int, paint: Paint) -> str:
    previous = link.previous_hash[:SHOWN_HASH_CHARS] or "genesis"
    own = link.event_hash[:SHOWN_HASH_CHARS]
    seq, event = widths
    chain = f"{paint(previous.ljust(SHOWN_HASH_CHARS), 'dim')} → {own}"
    return f"seq {str(link.sequence).rjust(seq)}  {link.event_type.ljust(event)}  {link.tool.ljust(tools)}  {chain}"
