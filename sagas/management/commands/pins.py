"""`semantic-saga pins`: the downstream tool definitions this deployment trusts, and the ones waiting for an
operator (registry.tool_pins).

    semantic-saga pins [--server S] [--status approved|changed|pending] [--json]
    semantic-saga pins diff SERVER/TOOL              what changed from the pinned definition
    semantic-saga pins accept SERVER/TOOL [--by N]   trust the definition shown (at a terminal)
    semantic-saga pins accept SERVER [--by N]        trust every waiting tool of SERVER, each as shown

A changed or pending tool is not dropped: each call of it waits for a person, showing what changed, until it is
accepted here or in the console. Accepting is a decision like approving a held call: only at an interactive
terminal, after seeing the difference and typing `yes`. What is accepted is exactly the definition shown: if the
server lists another one before the `yes`, nothing is accepted and the new difference is shown.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from governance.errors import ServiceError
from registry.models import ToolPin
from registry.tool_pins import accept, pin_state, pins
from sagas.management.held_calls_cli import DEFAULT_DECIDER, deciding_operator
from sagas.management.terminal import Paint, table

COLUMNS = [("server", "<"), ("tool", "<"), ("status", "<"), ("accepted by", "<"), ("seen", "<")]
STATUS_STYLES = {"approved": "green", "changed": "red", "pending": "yellow"}


class Command(BaseCommand):
    help = "List the downstream tool definitions the MCP proxy trusts (pins), show what changed, accept a change."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("verb", nargs="?", choices=["list", "diff", "accept"], default="list")
        parser.add_argument(
            "target",
            nargs="?",
            default="",
            help="SERVER/TOOL, for diff and accept (accept SERVER: every waiting tool).",
        )
        parser.add_argument("--server", default="", help="Only this server's tools.")
        parser.add_argument(
            "--status", default="", choices=["approved", "changed", "pending"], help="Only tools in this state."
        )
        parser.add_argument("--json", action="store_true", help="One JSON object per tool, one a line (NDJSON).")
        parser.add_argument("--by", default=DEFAULT_DECIDER, help="Who accepts (recorded as evidence).")

    def handle(self, *args: Any, **options: Any) -> None:
        actor = deciding_operator(options["by"])
        try:
            if options["verb"] == "list":
                self._list(pins(actor=actor, server=options["server"], status=options["status"]), options["json"])
                return
            chosen = self._chosen(actor, options["target"], options["verb"])
            for pin in chosen:
                self._show(pin)
            if options["verb"] == "accept":
                self._accept(actor, chosen)
        except ServiceError as refused:
            raise CommandError(f"{refused.code}: {refused.message}") from None

    def _list(self, found: list[ToolPin], as_json: bool) -> None:
        if as_json:
            for pin in found:
                state = pin_state(pin)
                row = {
                    "server": pin.server,
                    "tool": pin.tool,
                    "status": pin.status,
                    "pinned_hash": pin.pinned_hash,
                    "seen_hash": pin.seen_hash,
                    "accepted_by": pin.accepted_by,
                    "changes": list(state.changes),
                }
                self.stdout.write(json.dumps(row, sort_keys=True))
            return
        if not found:
            self.stdout.write("No tool is pinned yet: the proxy pins each server's tools the first time it lists them.")
            return
        paint = Paint.for_stream(self.stdout)
        rows = [[p.server, p.tool, p.status, p.accepted_by or "-", f"{p.seen_at:%Y-%m-%d %H:%M:%SZ}"] for p in found]
        self.stdout.write(table(COLUMNS, rows, paint, lambda i, cell: STATUS_STYLES.get(cell) if i == 2 else None))
        waiting = sum(pin.status != "approved" for pin in found)
        if waiting:
            self.stdout.write(
                f"{waiting} tool(s) wait for an operator: each call is held with what changed. "
                "`semantic-saga pins diff SERVER/TOOL` shows it; `pins accept SERVER/TOOL` trusts it."
            )

    def _chosen(self, actor: Any, target: str, verb: str) -> list[ToolPin]:
        """The pin named SERVER/TOOL, or (accept SERVER) every pin of SERVER waiting for an operator."""
        server, slash, tool = target.partition("/")
        if verb == "accept" and not slash and server:
            waiting = [pin for pin in pins(actor=actor, server=server) if pin.status != "approved"]
            if not waiting:
                raise CommandError(
                    f"No tool of server {server[:64]!r} waits for an operator; `semantic-saga pins --server "
                    f"{server[:64]}` lists its tools."
                )
            return waiting
        if not slash or not server or not tool:
            raise CommandError(f"Name the tool as SERVER/TOOL (got {target[:80]!r}); `semantic-saga pins` lists them.")
        found = [pin for pin in pins(actor=actor, server=server) if pin.tool == tool]
        if not found:
            raise CommandError(
                f"The proxy never listed a tool {tool[:64]!r} of server {server[:64]!r}; `semantic-saga pins` lists "
                "the tools it knows."
            )
        return found

    def _show(self, pin: ToolPin) -> None:
        state = pin_state(pin)
        self.stdout.write(f"{pin.server}/{pin.tool}: {pin.status}")
        for line in state.changes or ("the server lists the pinned definition",):
            self.stdout.write(f"  {line}")

    def _accept(self, actor: Any, shown: list[ToolPin]) -> None:
        waiting = [pin for pin in shown if pin.status != "approved"]
        if not waiting:
            self.stdout.write("Nothing to accept: the pinned definition is the one listed.")
            return
        if not sys.stdin.isatty():
            raise CommandError(
                "semantic-saga pins accept trusts a changed tool only at an interactive terminal: a person decides, "
                "not a program. Nothing was accepted. Run it yourself in a terminal, or accept in the console."
            )
        what = "this definition" if len(waiting) == 1 else f"these {len(waiting)} definitions"
        self.stdout.write(f"Type yes to trust {what} (their calls then flow by their gate): ", ending="")
        self.stdout.flush()
        if sys.stdin.readline().strip().lower() != "yes":
            raise CommandError("Not accepted. Nothing was changed.")
        moved = []
        for pin in waiting:
            try:  # the hash shown, read before the question: a definition listed since is not accepted with it
                accept(actor=actor, server=pin.server, tool=pin.tool, reviewed_hash=pin.seen_hash)
            except ServiceError as refused:
                moved.append(f"{refused.code}: {refused.message}")
                continue
            self.stdout.write(f"accepted {pin.server}/{pin.tool} as {actor.principal_id}")
        if moved:
            raise CommandError("\n".join(moved))
